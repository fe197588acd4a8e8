//! Bounded per-session replay buffers (AEP-0003 §5): admission dedupes on `(source, id)`,
//! events are kept ordered by `(epoch, seq)`, the oldest are evicted past the depth, and
//! the least recently written session is evicted past the session cap.
//!
//! A buffer holds lines, not parsed events: thousands of held events would otherwise pin
//! every payload's allocations (and free each one, cold, at eviction). Small lines that
//! arrive in order (nearly all) are copied into one byte ring per session, so admitting and
//! evicting an event allocates and frees nothing; a large line, or one that arrives out of
//! order, keeps its own buffer, which replays share rather than copy.
//!
//! A replay is paged ([`Cursor`]): each page is read under the caller's lock, a few hundred
//! KiB of lines at most, and the next one resumes after the last event sent. A consumer
//! that stops reading thus holds one page, never a copy of the buffer; events evicted
//! before it reached them are reported, not skipped. The replay parses the lines it sends.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::Arc;

use aep_schemas::Event;
use bytes::Bytes;

pub use aep_schemas::subscription::Position;

use crate::pipeline::Stamped;

/// Where a held line is.
enum Line {
    /// In the session's ring, at this absolute offset.
    Ring { at: u64, len: usize },
    /// Its own buffer (an out-of-order arrival).
    Own(Bytes),
}

/// A held event: position, admission, line, and the keyed hash of its id (its dedupe key).
struct Held {
    pos: Position,
    /// The admission that brought it (the buffers' clock then).
    stamp: u64,
    line: Line,
    key: u64,
    /// Its id was minted by this bridge ([`Stamped::minted`]).
    minted: bool,
}

impl Held {
    fn place(&self) -> Place {
        Place { pos: self.pos, stamp: self.stamp }
    }
}

/// Where an event sits in its session's order: by position, then by admission (several
/// events may share a position, the later admitted after). A session's events are sorted by
/// it and leave from the front, so every place up to the latest evicted one is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    pos: Position,
    stamp: u64,
}

impl Place {
    /// Before every event (admissions are stamped from 1).
    const FIRST: Place = Place { pos: Position { epoch: 0, seq: 0 }, stamp: 0 };

    /// After every event at `pos`: a resume strictly after a position.
    fn after(pos: Position) -> Place {
        Place { pos, stamp: u64::MAX }
    }
}

/// A hasher for keys that already are keyed hashes (the dedupe index): passes them through.
#[derive(Default)]
struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; fold anything else in so the hasher stays total.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

struct SessionBuffer {
    /// Events in `(epoch, seq)` order.
    events: VecDeque<Held>,
    /// The lines of the ring-held events, in the same order.
    ring: VecDeque<u8>,
    /// Absolute offset of `ring[0]`.
    ring_base: u64,
    /// Dedupe index: keyed hash of the id -> position of the held event with that key.
    /// A hit is confirmed against the held line (the hash only narrows the search).
    ///
    /// Kept only while `indexed`. An event whose id this bridge minted cannot repeat a held
    /// one, so a session that holds only such events (a session the bridge stamps: nearly
    /// every one) has no index: a probe at a random slot of a table in cold memory was most
    /// of the collector's cost per event. The first event that could repeat one (a history
    /// backfill's, an external emitter's) builds it from the held keys.
    ids: HashMap<u64, Position, BuildHasherDefault<PreHashed>>,
    /// Whether `ids` indexes every held event (or holds its key for another held event).
    indexed: bool,
    /// Held events whose ids were not minted here: once none is left, the index goes.
    foreign: usize,
    /// The latest position evicted: a resume before it has lost events.
    last_evicted: Option<Position>,
    /// The place of the latest evicted event (or, for a session back after being evicted
    /// whole, after its last position): a replay behind it has lost events.
    gone: Option<Place>,
    /// The clock when this buffer was made: a replay begun before then owes nothing in it.
    born: u64,
    last_write: u64,
    /// Bytes of the held lines.
    bytes: usize,
}

impl SessionBuffer {
    fn new(last_evicted: Option<Position>, clock: u64) -> Self {
        Self {
            events: VecDeque::new(),
            ring: VecDeque::new(),
            ring_base: 0,
            ids: HashMap::default(),
            indexed: false,
            foreign: 0,
            last_evicted,
            gone: last_evicted.map(Place::after),
            born: clock,
            last_write: clock,
            bytes: 0,
        }
    }

    /// Whether an event with `ev`'s `(source, id)` is held (a backfill's question).
    fn holds(&self, key: u64, ev: &Event) -> bool {
        match self.ids.get(&key) {
            Some(&at) if confirms(&self.events, &self.ring, self.ring_base, at, key, ev) => true,
            None if self.indexed => false,
            // Not indexed, or the indexed event is another (the same id from another source).
            _ => confirms_any(&self.events, &self.ring, self.ring_base, key, ev),
        }
    }

    /// Builds the dedupe index from the held keys (see `ids`).
    fn index(&mut self) {
        if self.indexed {
            return;
        }
        self.indexed = true;
        for h in &self.events {
            self.ids.entry(h.key).or_insert(h.pos);
        }
    }

    /// Admits `ev` (whose id hashes to `key`) into this session, keeping `depth` events.
    fn admit(&mut self, ev: &Stamped, key: u64, depth: usize, clock: u64) -> bool {
        let p = pos(ev);
        if self.last_evicted.is_some_and(|e| p <= e) {
            // Backfill older than what was already evicted: it would be evicted at once
            // (a write to the session all the same, unless it is a duplicate).
            if !self.holds(key, &ev.event) {
                self.last_write = clock;
            }
            return false;
        }
        if !ev.minted {
            self.index();
        }
        // An id minted here is new (AEP-0001 §7.4 has nothing to refuse) and, without an
        // index, nothing to record. Otherwise one probe: a held (source, id) is refused; a
        // new key is indexed, and so is a key whose entry outlived its event; a key held by
        // another event (the same id from another source, or a hash collision) leaves this
        // one held but unindexed, so a miss at the indexed event looks at every held event
        // with the key (rare: equal keys are equal ids).
        if self.indexed {
            match self.ids.entry(key) {
                Entry::Occupied(mut o) => {
                    let at = *o.get();
                    if confirms(&self.events, &self.ring, self.ring_base, at, key, &ev.event)
                        || confirms_any(&self.events, &self.ring, self.ring_base, key, &ev.event)
                    {
                        return false;
                    }
                    if !indexes_held(&self.events, self.last_evicted, at, key) {
                        o.insert(p);
                    }
                }
                Entry::Vacant(v) => {
                    v.insert(p);
                }
            }
        }
        if !ev.minted {
            self.foreign += 1;
        }
        self.last_write = clock;
        // Insert sorted by (epoch, seq), after the events at the same position (so sorted by
        // place); almost always an append, whose line joins the ring unless it is large.
        let at = self.events.iter().rposition(|e| e.pos <= p).map(|i| i + 1).unwrap_or(0);
        let line = if at == self.events.len() && ev.line.len() < OWN_LINE {
            let at = self.ring_base + self.ring.len() as u64;
            self.ring.extend(ev.line.iter());
            Line::Ring { at, len: ev.line.len() }
        } else {
            // Its own copy: the line may share a buffer with its batch, which must not be
            // pinned for as long as the replay buffer holds this one event. Replays share it.
            Line::Own(Bytes::copy_from_slice(&ev.line))
        };
        let held = Held { pos: p, stamp: clock, line, key, minted: ev.minted };
        // The append is `push_back`: the general insert costs a shift check and a call.
        if at == self.events.len() {
            self.events.push_back(held)
        } else {
            self.events.insert(at, held)
        }
        self.bytes += ev.line.len();
        while self.events.len() > depth {
            self.evict_front();
        }
        true
    }

    /// Evicts oldest events, keeping at least `keep`, until `total` (all sessions' bytes,
    /// this one's included) is at most `max`.
    fn shed_to(&mut self, total: &mut usize, max: usize, keep: usize) {
        while *total > max && self.events.len() > keep {
            let before = self.bytes;
            self.evict_front();
            *total -= before - self.bytes;
        }
    }

    /// Drops the oldest event.
    ///
    /// Its dedupe entry stays: removing it is a probe at a random slot of the index, a cache
    /// miss per evicted event (a visible share of an OTLP export's CPU time). An entry left
    /// behind is told apart by its position (see [`indexes_held`]), and once the index holds
    /// twice the events, one sequential pass drops every entry older than the evictions.
    fn evict_front(&mut self) {
        let Some(old) = self.events.pop_front() else { return };
        self.last_evicted = Some(old.pos);
        self.gone = Some(old.place());
        if !old.minted {
            self.foreign -= 1;
        }
        if self.indexed && self.foreign == 0 {
            // Only minted ids are held now: nothing can repeat one (see `ids`).
            self.indexed = false;
            self.ids = HashMap::default();
        } else if self.ids.len() > 2 * self.events.len() + STALE_SLACK {
            self.ids.retain(|_, at| *at >= old.pos);
            // A dropped entry may have been the key of a held event too (the same id from
            // another source, held unindexed): it is indexed now.
            for h in &self.events {
                self.ids.entry(h.key).or_insert(h.pos);
            }
        }
        match old.line {
            Line::Ring { len, .. } => {
                // Ring lines leave in the order they came: this one is at the front.
                self.ring.drain(..len.min(self.ring.len()));
                self.ring_base += len as u64;
                self.bytes -= len;
                // Give back the room a burst of large lines left behind.
                if self.ring.capacity() > RING_KEEP && self.ring.capacity() > 4 * self.ring.len() {
                    self.ring.shrink_to(self.ring.len() * 2);
                }
            }
            Line::Own(b) => self.bytes -= b.len(),
        }
    }
}

/// Dedupe entries a session's index may hold beyond twice its events before the entries of
/// evicted events are swept (so a small session does not sweep at every eviction).
const STALE_SLACK: usize = 64;

/// Ring capacity a session keeps however little it holds.
const RING_KEEP: usize = 256 * 1024;

/// Lines this long or longer are held in their own buffer, not the ring: a replay page
/// then hands them out as shared handles, and copies out of the ring only small lines.
const OWN_LINE: usize = 64 * 1024;

/// The bytes of a held line.
fn line(ring: &VecDeque<u8>, ring_base: u64, h: &Held) -> Bytes {
    match &h.line {
        Line::Own(b) => b.clone(),
        Line::Ring { at, len } => {
            let start = usize::try_from(at - ring_base).unwrap_or(usize::MAX);
            Bytes::from(ring.range(start..start.saturating_add(*len)).copied().collect::<Vec<u8>>())
        }
    }
}

/// A held event again, with the very line it was held as; `None` if the line does not
/// parse (it was written from a valid event, so this does not happen).
fn stamped(ring: &VecDeque<u8>, ring_base: u64, h: &Held) -> Option<Stamped> {
    parse(line(ring, ring_base, h))
}

/// A held line as the event it was, keeping the line; `None` if it does not parse (it was
/// written from a valid event, so this does not happen).
pub(super) fn parse(line: Bytes) -> Option<Stamped> {
    let body = line.strip_suffix(b"\n").unwrap_or(&line);
    let event: Event = serde_json::from_slice(body).ok()?;
    Some(Stamped::with_line(event, line))
}

/// A replay's steps as (the first exhaustion reported, the events).
#[cfg(test)]
fn split(steps: Vec<Paged>) -> (Option<Position>, Vec<Arc<Stamped>>) {
    let mut exhausted = None;
    let mut events = Vec::new();
    for s in steps {
        match s {
            Paged::Exhausted { earliest, .. } => {
                exhausted.get_or_insert(earliest);
            }
            Paged::Line(l) => events.extend(parse(l).map(Arc::new)),
        }
    }
    (exhausted, events)
}

/// Whether the event the index puts at `at` under `key` has `ev`'s `(source, id)`: the
/// index only narrows the search, the held line decides.
fn confirms(events: &VecDeque<Held>, ring: &VecDeque<u8>, ring_base: u64, at: Position, key: u64, ev: &Event) -> bool {
    held_under(events, at, key).any(|h| {
        stamped(ring, ring_base, h).is_some_and(|held| held.event.source == ev.source && held.event.id == ev.id)
    })
}

/// Whether any held event with dedupe key `key` has `ev`'s `(source, id)`: a scan, for when
/// the index does not name it.
fn confirms_any(events: &VecDeque<Held>, ring: &VecDeque<u8>, ring_base: u64, key: u64, ev: &Event) -> bool {
    events.iter().filter(|h| h.key == key).any(|h| {
        stamped(ring, ring_base, h).is_some_and(|held| held.event.source == ev.source && held.event.id == ev.id)
    })
}

/// The held events at `at` whose dedupe key is `key`.
fn held_under(events: &VecDeque<Held>, at: Position, key: u64) -> impl Iterator<Item = &Held> {
    let from = events.partition_point(|h| h.pos < at);
    events.range(from..).take_while(move |h| h.pos == at).filter(move |h| h.key == key)
}

/// Whether the index entry `key -> at` still names a held event. Events leave from the front
/// in `(epoch, seq)` order, so an entry past the latest eviction does; one at or before it
/// does only if an event with that key is still held at `at`.
fn indexes_held(events: &VecDeque<Held>, last_evicted: Option<Position>, at: Position, key: u64) -> bool {
    last_evicted.is_none_or(|e| at > e) || held_under(events, at, key).next().is_some()
}

fn pos(s: &Stamped) -> Position {
    Position { epoch: s.event.epoch(), seq: s.event.seq.unwrap_or(0) }
}

/// One session's place in a paged replay ([`ReplayBuffers::page`]).
#[derive(Debug, Clone)]
pub struct Cursor {
    session: String,
    /// The last event sent or passed over (or where the replay starts after).
    after: Place,
    /// The last event owed: the session's newest when the replay began.
    end: Place,
    /// The clock when the replay began: later admissions reach the subscriber live.
    snap: u64,
}

/// One step of a paged replay.
#[derive(Debug, Clone)]
pub enum Paged {
    /// A held event's line, ending in `\n`; a large one shared with the buffer.
    Line(Bytes),
    /// Events owed to the replay were evicted first (AEP-0003 §5); it goes on from `earliest`.
    Exhausted {
        /// The session.
        session: String,
        /// Its earliest held position.
        earliest: Position,
    },
}

/// Every session's buffer.
pub struct ReplayBuffers {
    depth: usize,
    max_sessions: usize,
    /// Bytes of held lines over all sessions, at most (AEP-0003 §5 leaves the depth to the
    /// collector; bounded in bytes, not only in events).
    max_bytes: usize,
    bytes: usize,
    /// Looked up once per event: foldhash, seeded per process (session ids are untrusted
    /// input), at a fraction of SipHash's cost on these short keys.
    sessions: HashMap<String, SessionBuffer, foldhash::fast::RandomState>,
    /// The last position each wholly evicted session held, so a session that comes back
    /// still reports the loss to a resume from before it (AEP-0003 §5).
    evicted: HashMap<String, Position>,
    clock: u64,
    /// The key of the dedupe hash (random per process: ids are untrusted input).
    hasher: foldhash::quality::RandomState,
}

impl ReplayBuffers {
    /// Buffers holding `depth` events per session, for at most `max_sessions` sessions.
    pub fn new(depth: usize, max_sessions: usize) -> Self {
        Self::with_bytes(depth, max_sessions, usize::MAX)
    }

    /// Buffers as [`ReplayBuffers::new`], holding at most about `max_bytes` of lines in all:
    /// past it the oldest events go first from the session just written, then from the
    /// least recently written sessions (an event larger than the bound is held alone).
    pub fn with_bytes(depth: usize, max_sessions: usize, max_bytes: usize) -> Self {
        Self {
            depth: depth.max(1),
            max_sessions: max_sessions.max(1),
            max_bytes: max_bytes.max(1),
            bytes: 0,
            sessions: HashMap::default(),
            evicted: HashMap::new(),
            clock: 0,
            hasher: Default::default(),
        }
    }

    /// Admits a sequenced session event; `false` for a `(source, id)` already held.
    pub fn admit(&mut self, ev: &Arc<Stamped>) -> bool {
        let Some(session) = ev.event.session.as_deref() else { return false };
        self.clock += 1;
        let clock = self.clock;
        // Source and id: the dedupe key (AEP-0001 §7.4). Keyed, so a sender cannot make keys
        // collide; a hit is still confirmed on the held line.
        let key = self.hasher.hash_one((&ev.event.source, &ev.event.id));
        // One lookup on the common path (the session is held); a new session pays for the rest.
        if let Some(buf) = self.sessions.get_mut(session) {
            let before = buf.bytes;
            let admitted = buf.admit(ev, key, self.depth, clock);
            self.bytes = self.bytes + buf.bytes - before;
            if self.bytes > self.max_bytes {
                self.shed(session);
            }
            return admitted;
        }
        if self.sessions.len() >= self.max_sessions
            && let Some(oldest) = self.sessions.iter().min_by_key(|(_, b)| b.last_write).map(|(k, _)| k.clone())
            && let Some(gone) = self.sessions.remove(&oldest)
        {
            self.bytes -= gone.bytes;
            let last = gone.events.back().map(|e| e.pos).or(gone.last_evicted);
            if let Some(last) = last {
                if self.evicted.len() >= self.max_sessions {
                    // Bounded memory: forget an arbitrary tombstone.
                    if let Some(k) = self.evicted.keys().next().cloned() {
                        self.evicted.remove(&k);
                    }
                }
                self.evicted.insert(oldest, last);
            }
        }
        let mut buf = SessionBuffer::new(self.evicted.remove(session), clock);
        let admitted = buf.admit(ev, key, self.depth, clock);
        self.bytes += buf.bytes;
        self.sessions.insert(session.to_owned(), buf);
        if self.bytes > self.max_bytes {
            self.shed(session);
        }
        admitted
    }

    /// Evicts oldest events until the byte bound holds: first from `session` (keeping its
    /// newest event), then from the least recently written other sessions.
    fn shed(&mut self, session: &str) {
        let (max, total) = (self.max_bytes, &mut self.bytes);
        if let Some(buf) = self.sessions.get_mut(session) {
            buf.shed_to(total, max, 1);
        }
        while *total > max {
            let Some(buf) = self
                .sessions
                .iter_mut()
                .filter(|(k, b)| k.as_str() != session && !b.events.is_empty())
                .min_by_key(|(_, b)| b.last_write)
                .map(|(_, b)| b)
            else {
                break;
            };
            buf.shed_to(total, max, 0);
        }
    }

    /// Bytes of lines held over all sessions.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// A replay of `session` strictly after `after`, or `None` when the session is not held.
    /// Its first page starts with replay-exhausted when the buffer no longer covers the gap
    /// (AEP-0003 §5).
    pub fn replay_after(&self, session: &str, after: Position) -> Option<Cursor> {
        let buf = self.sessions.get(session)?;
        Some(self.cursor(session, buf, Place::after(after)))
    }

    /// A replay of every held session, each from its earliest held event, least recently
    /// written first (replay-all, AEP-0003 §5).
    pub fn replay_all(&self) -> Vec<Cursor> {
        let mut sessions: Vec<(&String, &SessionBuffer)> =
            self.sessions.iter().filter(|(_, b)| !b.events.is_empty()).collect();
        sessions.sort_by_key(|(_, b)| b.last_write);
        // From just after the latest eviction: nothing is reported lost unless more goes.
        sessions.into_iter().map(|(s, b)| self.cursor(s, b, b.gone.unwrap_or(Place::FIRST))).collect()
    }

    fn cursor(&self, session: &str, buf: &SessionBuffer, after: Place) -> Cursor {
        let end = buf.events.back().map_or(Place::FIRST, Held::place);
        Cursor { session: session.to_owned(), after, end, snap: self.clock }
    }

    /// Appends to `out` the next events `c` is owed, while `budget` (bytes of lines) lasts,
    /// and moves `c` past them; a budget that is not spent takes at least one event. Events
    /// owed but evicted since the cursor was made come out as one replay-exhausted step, then
    /// the replay goes on from the earliest held. `true` once `c` has nothing more.
    pub fn page(&self, c: &mut Cursor, budget: &mut usize, out: &mut Vec<Paged>) -> bool {
        // Events past `end` or admitted after `snap` reach the subscriber live.
        let Some(buf) = self.sessions.get(&c.session) else { return true };
        let owes = c.after < c.end;
        let exhausted = |out: &mut Vec<Paged>| {
            if let Some(front) = buf.events.front() {
                out.push(Paged::Exhausted { session: c.session.clone(), earliest: front.pos });
            }
        };
        if buf.born > c.snap {
            // The session was evicted whole and is back: what it held is gone.
            if owes {
                exhausted(out);
            }
            return true;
        }
        if let Some(gone) = buf.gone
            && gone > c.after
        {
            if owes {
                exhausted(out);
            }
            c.after = gone;
        }
        let from = buf.events.partition_point(|h| h.place() <= c.after);
        for h in buf.events.range(from..) {
            if *budget == 0 {
                return false;
            }
            let place = h.place();
            if place > c.end {
                break;
            }
            c.after = place;
            if h.stamp <= c.snap {
                let line = line(&buf.ring, buf.ring_base, h);
                *budget = budget.saturating_sub(line.len());
                out.push(Paged::Line(line));
            }
        }
        c.after = c.end;
        true
    }

    /// Every step of a replay at once (the tests' view of it).
    #[cfg(test)]
    fn drain(&self, c: &mut Cursor) -> Vec<Paged> {
        let (mut out, mut budget) = (Vec::new(), usize::MAX);
        while !self.page(c, &mut budget, &mut out) {}
        out
    }

    /// Events of `session` strictly after `after`, and the earliest held position when the
    /// buffer no longer covers the gap: one replay read to its end.
    #[cfg(test)]
    fn after(&self, session: &str, after: Position) -> (Option<Position>, Vec<Arc<Stamped>>) {
        let Some(mut c) = self.replay_after(session, after) else { return (None, Vec::new()) };
        split(self.drain(&mut c))
    }

    /// Every held event, session by session, each from its earliest held position.
    #[cfg(test)]
    fn all(&self) -> Vec<Arc<Stamped>> {
        self.replay_all().iter_mut().flat_map(|c| split(self.drain(c)).1).collect()
    }

    /// Number of sessions held.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aep_schemas::Event;

    fn ev(id: &str, session: &str, epoch: u64, seq: u64) -> Arc<Stamped> {
        Arc::new(Stamped::new(Event {
            aep: "0.1".into(),
            id: id.into(),
            r#type: "run.started".into(),
            time: "2026-01-01T00:00:00Z".into(),
            source: "aep://h/agent/a".into(),
            agent: "a".into(),
            session: Some(session.into()),
            seq: Some(seq),
            epoch: Some(epoch),
            ..Default::default()
        }))
    }

    #[test]
    fn dedupes_orders_evicts_and_reports_exhaustion() {
        let mut b = ReplayBuffers::new(3, 10);
        assert!(b.admit(&ev("a", "s", 0, 0)));
        assert!(!b.admit(&ev("a", "s", 0, 0)));
        assert!(b.admit(&ev("c", "s", 0, 2)));
        assert!(b.admit(&ev("b", "s", 0, 1)));
        let (ex, got) = b.after("s", Position { epoch: 0, seq: 0 });
        assert_eq!(ex, None);
        assert_eq!(got.iter().map(|e| e.event.id.as_str()).collect::<Vec<_>>(), ["b", "c"]);
        assert!(b.admit(&ev("d", "s", 1, 0)));
        assert!(b.admit(&ev("e", "s", 1, 1)));
        let (ex, got) = b.after("s", Position { epoch: 0, seq: 0 });
        assert_eq!(ex, Some(Position { epoch: 0, seq: 2 }));
        assert_eq!(got.len(), 3);
        let (ex, _) = b.after("s", Position { epoch: 0, seq: 2 });
        assert_eq!(ex, None, "nothing between (0,2) and the earliest held (0,2)");
    }

    /// `ev` as the pipeline's stamper hands it on when it minted the id.
    fn minted(id: &str, session: &str, seq: u64) -> Arc<Stamped> {
        let e = Arc::into_inner(ev(id, session, 0, seq)).unwrap();
        Arc::new(Stamped { minted: true, ..e })
    }

    /// Dedupe is on `(source, id)`: the same id from another source is another event.
    #[test]
    fn the_same_id_from_another_source_is_deduped_too() {
        let from = |source: &str, seq: u64| {
            let mut e = Arc::into_inner(ev("e5", "s", 0, seq)).unwrap().event;
            e.source = source.into();
            Arc::new(Stamped::new(e))
        };
        let mut b = ReplayBuffers::new(10, 10);
        assert!(b.admit(&from("aep://h/agent/a", 1)));
        assert!(b.admit(&from("aep://h/agent/b", 2)), "another source's event");
        assert!(!b.admit(&from("aep://h/agent/b", 3)), "a repeat of the second");
        assert!(!b.admit(&from("aep://h/agent/a", 4)), "a repeat of the first");
    }

    /// The index names one held event per key; events whose keys collide are told apart by
    /// their held lines. Every event here has the same key: a repeat of one held unindexed
    /// was admitted again, and a sweep of stale entries dropped the key while such an event
    /// was still held.
    #[test]
    fn colliding_keys_are_told_apart_by_the_held_lines() {
        const KEY: u64 = 7;
        let depth = 6;
        let mut b = SessionBuffer::new(None, 0);
        let mut clock = 0;
        let mut admit = |b: &mut SessionBuffer, id: &str, seq: u64| {
            clock += 1;
            b.admit(&ev(id, "s", 0, seq), KEY, depth, clock)
        };
        assert!(admit(&mut b, "a", 1));
        assert!(admit(&mut b, "b", 2), "another id under the same key");
        assert!(!admit(&mut b, "b", 3), "a repeat of the unindexed one");
        assert!(!admit(&mut b, "a", 4), "a repeat of the indexed one");
        // Once the indexed event is evicted and the index swept (after any number of other
        // events), the other one is still found.
        for fill in 0..3 * (2 * depth + STALE_SLACK) as u64 {
            let mut b = SessionBuffer::new(None, 0);
            let mut seq = 0;
            let mut next = |b: &mut SessionBuffer, id: &str, key: u64| {
                seq += 1;
                clock += 1;
                b.admit(&ev(id, "s", 0, seq), key, depth, clock)
            };
            for i in 0..fill {
                assert!(next(&mut b, &format!("f{i}"), 100 + i));
            }
            assert!(next(&mut b, "e5", KEY));
            for i in 0..depth as u64 - 1 {
                assert!(next(&mut b, &format!("g{i}"), 10_000 + i));
            }
            assert!(next(&mut b, "e6", KEY), "held unindexed, the last of the depth");
            for i in 0..depth as u64 - 1 {
                assert!(next(&mut b, &format!("h{i}"), 20_000 + i));
                assert!(!next(&mut b, "e6", KEY), "after {fill} events and {i} more: a repeat");
            }
        }
    }

    /// Events whose ids the bridge minted are held without a dedupe index; the first event
    /// that could repeat one builds it, so its repeat of a minted event is still refused;
    /// and once no such event is held, the index goes again.
    #[test]
    fn minted_ids_need_no_index_until_another_id_arrives() {
        let depth = 4;
        let mut b = ReplayBuffers::new(depth, 10);
        for seq in 0..10 {
            assert!(b.admit(&minted(&format!("m{seq}"), "s", seq)));
        }
        assert!(b.sessions["s"].ids.is_empty(), "minted ids are not indexed");
        // A relayed copy of a held minted event (the same source and id) is refused.
        assert!(!b.admit(&ev("m9", "s", 0, 10)));
        assert_eq!(b.sessions["s"].ids.len(), depth, "the index was built from the held keys");
        assert!(b.admit(&ev("x1", "s", 0, 11)), "a new id from elsewhere");
        assert!(b.admit(&minted("m12", "s", 12)), "minted ids are indexed while the index lives");
        assert!(!b.admit(&ev("m12", "s", 0, 13)));
        assert!(!b.admit(&ev("x1", "s", 0, 14)));
        for seq in 15..15 + depth as u64 {
            assert!(b.admit(&minted(&format!("m{seq}"), "s", seq)));
        }
        assert!(b.sessions["s"].ids.is_empty(), "x1 evicted: only minted ids are held, the index is gone");
        assert!(!b.admit(&ev("m18", "s", 0, 30)), "and is built again for the next event from elsewhere");
        let held: Vec<u64> =
            b.after("s", Position { epoch: 0, seq: 0 }).1.iter().map(|e| e.event.seq.unwrap()).collect();
        assert_eq!(held, [15, 16, 17, 18]);
    }

    fn sized(id: &str, session: &str, seq: u64, pad: usize) -> Arc<Stamped> {
        let mut e = Arc::into_inner(ev(id, session, 0, seq)).unwrap().event;
        e.data = Some(serde_json::json!({ "pad": "x".repeat(pad) }));
        Arc::new(Stamped::new(e))
    }

    /// Large events held unbounded memory when only the count was bounded.
    #[test]
    fn the_byte_bound_evicts_oldest_first_here_then_from_idle_sessions() {
        let mut b = ReplayBuffers::with_bytes(1024, 10, 10_000);
        for i in 0..150 {
            assert!(b.admit(&sized(&format!("a{i}"), "big", i, 3_000)));
            assert!(
                b.bytes() <= 10_000 || b.sessions() == 1 && b.after("big", Position { epoch: 0, seq: 0 }).1.len() == 1
            );
        }
        let (exhausted, held) = b.after("big", Position { epoch: 0, seq: 0 });
        assert_eq!(held.len(), 3, "three 3 KB lines fit in 10 KB");
        assert_eq!(held.last().unwrap().event.id, "a149");
        assert!(exhausted.is_some(), "a resume from the start learns events were lost");
        // A new session's first event pushes out the idle session's oldest; its second
        // then pushes out its own first.
        assert!(b.admit(&sized("n0", "new", 0, 3_000)));
        assert_eq!(b.after("big", Position { epoch: 0, seq: 0 }).1.len(), 2);
        assert!(b.admit(&sized("n1", "new", 1, 3_000)));
        assert!(b.bytes() <= 10_000);
        let ids = |s: &str| {
            b.all()
                .into_iter()
                .filter(|e| e.event.session.as_deref() == Some(s))
                .map(|e| e.event.id.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids("new"), ["n1"]);
        assert_eq!(ids("big"), ["a148", "a149"]);
        // One event larger than the bound is held alone.
        assert!(b.admit(&sized("huge", "new", 5, 20_000)));
        assert_eq!(b.all().len(), 1);
    }

    fn lines(steps: &[Paged]) -> Vec<String> {
        steps
            .iter()
            .map(|s| match s {
                Paged::Line(l) => parse(l.clone()).unwrap().event.id,
                Paged::Exhausted { session, earliest } => format!("exhausted {session} {}", earliest.seq),
            })
            .collect()
    }

    /// A page takes lines while its budget lasts; the next resumes after the last event sent,
    /// even between two events at the same position, and owes nothing admitted after the
    /// replay began (that goes live).
    #[test]
    fn pages_resume_after_the_last_event_sent() {
        let mut b = ReplayBuffers::new(100, 10);
        for (id, seq) in [("a", 0), ("b", 1), ("c", 3), ("c2", 3), ("d", 4)] {
            assert!(b.admit(&ev(id, "s", 0, seq)));
        }
        let mut c = b.replay_all().pop().unwrap();
        assert!(b.admit(&ev("late", "s", 0, 2)), "admitted after the replay began: live, not owed");
        let mut pages = Vec::new();
        loop {
            // A budget of one byte: one line per page.
            let (mut page, mut budget) = (Vec::new(), 1);
            let done = b.page(&mut c, &mut budget, &mut page);
            pages.push(lines(&page));
            if done {
                break;
            }
        }
        assert_eq!(pages.concat(), ["a", "b", "c", "c2", "d"]);
        assert!(pages.len() >= 5, "one line per page: {pages:?}");
        // A resume after a position pages the same way, strictly after it.
        let mut c = b.replay_after("s", Position { epoch: 0, seq: 2 }).unwrap();
        assert_eq!(lines(&b.drain(&mut c)), ["c", "c2", "d"]);
    }

    /// Events owed to a replay and evicted before it reached them are reported once (the
    /// replay-exhausted marker, naming the earliest held), then the replay goes on from there.
    #[test]
    fn eviction_mid_replay_yields_the_marker() {
        let mut b = ReplayBuffers::new(4, 10);
        for seq in 0..4 {
            assert!(b.admit(&ev(&format!("e{seq}"), "s", 0, seq)));
        }
        let mut c = b.replay_all().pop().unwrap();
        let (mut page, mut budget) = (Vec::new(), 1);
        assert!(!b.page(&mut c, &mut budget, &mut page));
        assert_eq!(lines(&page), ["e0"]);
        // e1 and e2 go before the replay reaches them; e4..e6 arrive live.
        for seq in 4..7 {
            assert!(b.admit(&ev(&format!("e{seq}"), "s", 0, seq)));
        }
        assert_eq!(lines(&b.drain(&mut c)), ["exhausted s 3", "e3"]);
        // Nothing lost past the last owed event: no marker.
        let mut c = b.replay_all().pop().unwrap();
        assert_eq!(lines(&b.drain(&mut c)), ["e3", "e4", "e5", "e6"]);

        // A session evicted whole mid-replay, then back: reported, and nothing of it is owed.
        let mut b = ReplayBuffers::new(4, 1);
        assert!(b.admit(&ev("s0", "s", 0, 0)));
        assert!(b.admit(&ev("s1", "s", 0, 1)));
        let mut c = b.replay_all().pop().unwrap();
        assert!(b.admit(&ev("t0", "t", 0, 0)), "evicts s");
        assert!(b.admit(&ev("s5", "s", 0, 5)), "s is back");
        assert_eq!(lines(&b.drain(&mut c)), ["exhausted s 5"]);
    }

    /// A large line is held on its own and every replay hands out that one buffer.
    #[test]
    fn large_lines_are_shared_by_replays() {
        let mut b = ReplayBuffers::new(4, 10);
        assert!(b.admit(&sized("big", "s", 0, OWN_LINE)));
        let line = |b: &ReplayBuffers| match b.drain(&mut b.replay_all().pop().unwrap()).pop() {
            Some(Paged::Line(l)) => l,
            other => panic!("{other:?}"),
        };
        let (one, two) = (line(&b), line(&b));
        assert!(one.len() > OWN_LINE);
        assert_eq!(one.as_ptr(), two.as_ptr(), "the same bytes, not a copy per replay");
    }

    #[test]
    fn refuses_backfill_behind_eviction_and_redelivery_after_it() {
        let mut b = ReplayBuffers::new(2, 10);
        for (id, seq) in [("a", 0), ("b", 1), ("c", 2)] {
            assert!(b.admit(&ev(id, "s", 0, seq)));
        }
        assert!(!b.admit(&ev("z", "s", 0, 0)), "older than the evicted (0,0): refused");
        assert!(!b.admit(&ev("a", "s", 0, 0)), "the evicted event itself: refused");
        assert!(!b.admit(&ev("c", "s", 0, 2)), "a held (source, id): refused");
        assert!(b.admit(&ev("a", "s", 0, 3)), "an evicted id is forgotten with its event");
        let (_, got) = b.after("s", Position { epoch: 0, seq: 0 });
        assert_eq!(got.iter().map(|e| e.event.id.as_str()).collect::<Vec<_>>(), ["c", "a"]);
    }

    #[test]
    fn replays_the_exact_lines_held_in_the_ring_or_alone() {
        let mut b = ReplayBuffers::new(4, 10);
        // In order (ring), then one out of order (its own buffer), then more in order.
        let admitted: Vec<Arc<Stamped>> = [("a", 0), ("b", 1), ("d", 3), ("c", 2), ("e", 4), ("f", 5)]
            .iter()
            .map(|(id, seq)| ev(id, "s", 0, *seq))
            .collect();
        for e in &admitted {
            assert!(b.admit(e));
        }
        let (_, got) = b.after("s", Position { epoch: 0, seq: 0 });
        let ids: Vec<&str> = got.iter().map(|e| e.event.id.as_str()).collect();
        assert_eq!(ids, ["c", "d", "e", "f"], "ordered by seq, the two oldest evicted");
        for g in &got {
            let sent = admitted.iter().find(|a| a.event.id == g.event.id).unwrap();
            assert_eq!(g.line, sent.line, "byte-identical line for {}", g.event.id);
            assert_eq!(g.event, sent.event);
        }
        // The same id from another source is another event; the same (source, id) is not.
        let mut other = ev("e", "s", 0, 6);
        Arc::get_mut(&mut other).unwrap().event.source = "aep://h/agent/b".into();
        let other = Arc::new(Stamped::new(other.event.clone()));
        assert!(b.admit(&other));
        assert!(!b.admit(&ev("e", "s", 0, 4)), "a held (source, id) is refused, whatever its line");
        assert_eq!(b.all().len(), 4);
    }

    #[test]
    fn session_cap_evicts_least_recently_written() {
        let mut b = ReplayBuffers::new(5, 2);
        b.admit(&ev("1", "old", 0, 0));
        b.admit(&ev("2", "new", 0, 0));
        b.admit(&ev("3", "old", 0, 1));
        b.admit(&ev("4", "third", 0, 0));
        assert_eq!(b.sessions(), 2);
        assert!(
            b.after("new", Position { epoch: 0, seq: 0 }).1.is_empty()
                && b.after("old", Position { epoch: 0, seq: 0 }).1.len() == 1
        );
        // The wholly evicted session comes back: a resume from before the loss is exhausted.
        b.admit(&ev("5", "new", 0, 1));
        let (ex, got) = b.after("new", Position { epoch: 0, seq: 0 });
        assert_eq!(ex, None, "(0,0) was the last lost position; nothing after it was lost");
        assert_eq!(got.len(), 1);
        b.admit(&ev("6", "old", 0, 2));
        b.admit(&ev("7", "third", 0, 1));
        b.admit(&ev("8", "new", 0, 2));
        let (ex, _) = b.after("old", Position { epoch: 0, seq: 0 });
        assert_eq!(ex, None, "old is gone again; nothing held to name");
        b.admit(&ev("9", "old", 0, 5));
        let (ex, got) = b.after("old", Position { epoch: 0, seq: 0 });
        assert_eq!(ex, Some(Position { epoch: 0, seq: 5 }), "seq 1 and 2 were lost with the session");
        assert_eq!(got.len(), 1);
    }

    /// The buffer against a plain model (a sorted list per session, the same rules) over
    /// pseudo-random admissions: in and out of order, duplicates, the same id from another
    /// source, backfill behind eviction, varying line sizes. Every replay must name the same
    /// events with the same bytes, and report the same exhaustion.
    #[test]
    fn matches_a_plain_model_under_random_admissions() {
        // Few ids: duplicates and collisions of positions; many: the index sweeps the
        // entries its evictions left behind (more than 2 x depth + STALE_SLACK keys).
        for ids in [40, 400] {
            model_run(ids);
        }
    }

    /// Eviction leaves dedupe entries behind; they are swept once the index holds twice the
    /// events (it stays bounded), and an id evicted and then sent again at a later position
    /// is admitted once, its stale entry reused, so a second copy is refused.
    #[test]
    fn evicted_entries_are_swept_and_reused() {
        let depth = 6;
        let mut b = ReplayBuffers::new(depth, 10);
        let mut most = 0;
        for seq in 0..1000 {
            assert!(b.admit(&ev(&format!("e{seq}"), "s", 0, seq)));
            most = most.max(b.sessions["s"].ids.len());
        }
        assert!(most <= 2 * depth + STALE_SLACK + 1, "the index held {most} entries for {depth} events");
        assert!(!b.admit(&ev("e999", "s", 0, 2000)), "a held id is refused at any position");
        // e993 was the last evicted: its entry is still in the index (a sweep keeps it).
        assert!(b.admit(&ev("e993", "s", 0, 1000)), "an evicted id is new again past the evictions");
        assert!(!b.admit(&ev("e993", "s", 0, 1001)), "and then held: its reused entry finds it");
        let held: Vec<u64> =
            b.after("s", Position { epoch: 0, seq: 0 }).1.iter().map(|e| e.event.seq.unwrap()).collect();
        assert_eq!(held, [995, 996, 997, 998, 999, 1000]);
    }

    fn model_run(ids: u64) {
        struct Model {
            held: Vec<(Position, String, String, Bytes)>,
            last_evicted: Option<Position>,
        }
        let depth = 6;
        let mut b = ReplayBuffers::new(depth, 10);
        let mut models: HashMap<String, Model> = HashMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for step in 0..4000 {
            let session = format!("s{}", next(3));
            let (epoch, seq) = (next(2), next(24));
            // A third of the events have ids minted by the bridge: never seen before. Some
            // others repeat a minted id (relayed back to the collector).
            let minted = next(3) == 0;
            let id = if minted {
                format!("m{step}")
            } else if step > 0 && next(4) == 0 {
                format!("m{}", step - 1 - next(step.min(30)))
            } else {
                format!("e{}", next(ids))
            };
            let source = if next(5) == 0 { "aep://h/agent/b" } else { "aep://h/agent/a" };
            let mut e = ev(&id, &session, epoch, seq);
            let mut event = e.event.clone();
            event.source = source.into();
            event.subject = Some("x".repeat(next(90) as usize));
            e = Arc::new(Stamped { minted, ..Stamped::new(event) });
            let p = Position { epoch, seq };
            let m = models.entry(session.clone()).or_insert(Model { held: Vec::new(), last_evicted: None });
            let dup = m.held.iter().any(|(_, s, i, _)| s == source && *i == id);
            let want = !(m.last_evicted.is_some_and(|l| p <= l) || dup);
            if want {
                let at = m.held.iter().rposition(|(q, ..)| *q <= p).map_or(0, |i| i + 1);
                m.held.insert(at, (p, source.to_owned(), id.clone(), e.line.clone()));
                while m.held.len() > depth {
                    m.last_evicted = Some(m.held.remove(0).0);
                }
            }
            assert_eq!(b.admit(&e), want, "step {step}: admit {source} {id} at {p:?} in {session}");
            if step % 97 == 0 {
                for (s, m) in &models {
                    let from = Position { epoch: next(2), seq: next(24) };
                    let (exhausted, got) = b.after(s, from);
                    let expect: Vec<_> = m.held.iter().filter(|(q, ..)| *q > from).collect();
                    assert_eq!(got.len(), expect.len(), "step {step}: replay of {s} after {from:?}");
                    for (g, (q, src, i, line)) in got.iter().zip(expect) {
                        assert_eq!((pos(g), &*g.event.source, g.event.id.as_str()), (*q, src.as_str(), i.as_str()));
                        assert_eq!(&g.line, line, "the held bytes");
                    }
                    let earliest = m.held.first().map(|h| h.0);
                    let want_ex = match (m.last_evicted, earliest) {
                        (Some(gone), Some(e)) if gone > from => Some(e),
                        _ => None,
                    };
                    assert_eq!(exhausted, want_ex, "step {step}: exhaustion of {s} after {from:?}");
                }
            }
        }
    }
}
