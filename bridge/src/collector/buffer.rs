//! Bounded per-session replay buffers (AEP-0003 §5): admission dedupes on `(source, id)`,
//! events are kept ordered by `(epoch, seq)`, the oldest are evicted past the depth, and
//! the least recently written session is evicted past the session cap.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use aep_schemas::Event;
use bytes::Bytes;

use crate::pipeline::Stamped;

/// A resume position within a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// Restart generation.
    pub epoch: u64,
    /// Sequence within the epoch.
    pub seq: u64,
}

/// The dedupe key of a held event, `(source, id)` (AEP-0001 §5.1 #2, §7), in one allocation:
/// the two strings back to back and where the id starts.
#[derive(Clone)]
struct Key {
    both: Arc<str>,
    id_at: usize,
}

impl Key {
    fn of(s: &Stamped) -> Self {
        let (source, id) = (&s.event.source, &s.event.id);
        let mut both = String::with_capacity(source.len() + id.len());
        both.push_str(source);
        both.push_str(id);
        Self { both: Arc::from(both), id_at: source.len() }
    }

    fn id(&self) -> &str {
        &self.both[self.id_at..]
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.id_at == other.id_at && self.both == other.both
    }
}

impl Eq for Key {}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // The id alone: equal keys have equal ids, and ids are unique per source in
        // practice, so hashing the (long, shared) source URI as well buys nothing.
        self.id().hash(state);
    }
}

/// A buffered event as held: its line (shared with the sinks, byte-identical), position and
/// dedupe key. The parsed event is not kept: a buffer of thousands of events would pin
/// every payload's allocations and pay a cold miss for each one at eviction; a replay
/// parses the few lines it sends instead.
struct Held {
    line: Bytes,
    pos: Position,
    key: Key,
}

impl Held {
    /// The event again, with the very line it was held as; `None` if the line does not
    /// parse (it was written from a valid event, so this does not happen).
    fn stamped(&self) -> Option<Arc<Stamped>> {
        let body = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
        let event: Event = serde_json::from_slice(body).ok()?;
        Some(Arc::new(Stamped { event, line: self.line.clone() }))
    }
}

struct SessionBuffer {
    events: VecDeque<Held>,
    ids: HashSet<Key>,
    /// The latest position evicted: a resume before it has lost events.
    last_evicted: Option<Position>,
    last_write: u64,
}

fn pos(s: &Stamped) -> Position {
    Position { epoch: s.event.epoch(), seq: s.event.seq.unwrap_or(0) }
}

/// Every session's buffer.
pub struct ReplayBuffers {
    depth: usize,
    max_sessions: usize,
    sessions: HashMap<String, SessionBuffer>,
    /// The last position each wholly evicted session held, so a session that comes back
    /// still reports the loss to a resume from before it (AEP-0003 §5).
    evicted: HashMap<String, Position>,
    clock: u64,
}

impl ReplayBuffers {
    /// Buffers holding `depth` events per session, for at most `max_sessions` sessions.
    pub fn new(depth: usize, max_sessions: usize) -> Self {
        Self {
            depth: depth.max(1),
            max_sessions: max_sessions.max(1),
            sessions: HashMap::new(),
            evicted: HashMap::new(),
            clock: 0,
        }
    }

    /// Admits a sequenced session event; `false` for a `(source, id)` already held.
    pub fn admit(&mut self, ev: &Arc<Stamped>) -> bool {
        let Some(session) = ev.event.session.as_deref() else { return false };
        self.clock += 1;
        let clock = self.clock;
        // One lookup on the common path (the session is held); a new session pays for the rest.
        let held = self.sessions.contains_key(session);
        if !held
            && self.sessions.len() >= self.max_sessions
            && let Some(oldest) = self.sessions.iter().min_by_key(|(_, b)| b.last_write).map(|(k, _)| k.clone())
            && let Some(gone) = self.sessions.remove(&oldest)
        {
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
        if !held {
            let buf = SessionBuffer {
                events: VecDeque::new(),
                ids: HashSet::new(),
                last_evicted: self.evicted.remove(session),
                last_write: clock,
            };
            self.sessions.insert(session.to_owned(), buf);
        }
        let Some(buf) = self.sessions.get_mut(session) else { return false };
        let key = Key::of(ev);
        let p = pos(ev);
        if buf.last_evicted.is_some_and(|e| p <= e) {
            // Backfill older than what was already evicted: it would be evicted at once
            // (a write to the session all the same, unless it is a duplicate).
            if !buf.ids.contains(&key) {
                buf.last_write = clock;
            }
            return false;
        }
        // One hash: a held `(source, id)` is refused here, a new one recorded.
        if !buf.ids.insert(key.clone()) {
            return false;
        }
        buf.last_write = clock;
        // Insert sorted by (epoch, seq); almost always an append.
        let at = buf.events.iter().rposition(|e| e.pos <= p).map(|i| i + 1).unwrap_or(0);
        buf.events.insert(at, Held { line: ev.line.clone(), pos: p, key });
        while buf.events.len() > self.depth {
            if let Some(old) = buf.events.pop_front() {
                buf.last_evicted = Some(old.pos);
                buf.ids.remove(&old.key);
            }
        }
        true
    }

    /// Events of `session` strictly after `after`, and the earliest held position when the
    /// buffer no longer covers the gap (replay-exhausted, AEP-0003 §5).
    pub fn after(&self, session: &str, after: Position) -> (Option<Position>, Vec<Arc<Stamped>>) {
        let Some(buf) = self.sessions.get(session) else { return (None, Vec::new()) };
        let earliest = buf.events.front().map(|e| e.pos);
        // Exhausted exactly when an event after the requested position was evicted.
        let exhausted = match (buf.last_evicted, earliest) {
            (Some(gone), Some(e)) if gone > after => Some(e),
            _ => None,
        };
        (exhausted, buf.events.iter().filter(|e| e.pos > after).filter_map(Held::stamped).collect())
    }

    /// Every held event, session by session, each from its earliest held position.
    pub fn all(&self) -> Vec<Arc<Stamped>> {
        let mut sessions: Vec<&SessionBuffer> = self.sessions.values().collect();
        sessions.sort_by_key(|b| b.last_write);
        sessions.into_iter().flat_map(|b| b.events.iter().filter_map(Held::stamped)).collect()
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
}
