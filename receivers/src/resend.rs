//! Resent events recognised on arrival: an edge bridge resends what its hub had not
//! confirmed when the link dropped (the hub restarting, a network cut), so the hub may get
//! an event it already wrote. AEP-0001 §7 rule 2: a position at or below the highest taken from that
//! source for that session is either a redelivery (dedupe on `(source, id)`, rule 4) or
//! backfill (a position not seen yet, delivered late), which must be kept. So a repeat is an
//! event below the high water whose `(source, id)` was taken: dropped before it reaches a
//! log twice. One below it with an id not remembered is taken as backfill; the memory of
//! ids is bounded, so a redelivery older than it is written again (a duplicate, which
//! at-least-once delivery allows), never dropped.
//!
//! The high water and the last ids survive a restart of the hub through `seed`, which reads
//! them back from where the hub wrote the session (the tail of its JSONL log).

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

/// Sessions remembered at most; one forgotten is read back from `seed` when seen again.
pub const MAX_SESSIONS: usize = 65_536;

/// `(source, id)` pairs remembered at most, over every session (a 64-bit hash each).
pub const MAX_IDS: usize = 262_144;

/// Bytes of a log's end read back by [`log_tail`].
const TAIL_BYTES: u64 = 256 * 1024;

/// What a session's log says of one source: its last position and the ids of its last lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tail {
    /// The `(epoch, seq)` of the last complete line (the source's).
    pub last: (u64, u64),
    /// The ids of that source's complete lines in the log's last bytes, oldest first.
    pub ids: Vec<String>,
}

/// Reads a session's tail as written: `(agent, session, source)` to its [`Tail`].
pub type Seed = Box<dyn Fn(&str, &str, &str) -> Option<Tail> + Send + Sync>;

/// `(source, session)`.
type Key = (Box<str>, Box<str>);

/// The positions with their keys in the order first seen (the oldest forgotten first), and
/// the `(source, id)` hashes taken, likewise.
#[derive(Default)]
struct Held {
    high: HashMap<Key, (u64, u64)>,
    order: VecDeque<Key>,
    ids: HashSet<u64>,
    id_order: VecDeque<u64>,
}

impl Held {
    fn remember(&mut self, h: u64) {
        if self.ids.insert(h) {
            self.id_order.push_back(h);
            while self.id_order.len() > MAX_IDS {
                if let Some(old) = self.id_order.pop_front() {
                    self.ids.remove(&old);
                }
            }
        }
    }

    fn set_high(&mut self, key: Key, pos: (u64, u64)) {
        if self.high.insert(key.clone(), pos).is_none() {
            self.order.push_back(key);
            while self.order.len() > MAX_SESSIONS {
                if let Some(old) = self.order.pop_front() {
                    self.high.remove(&old);
                }
            }
        }
    }
}

/// The highest `(epoch, seq)` taken per `(source, session)`, and the `(source, id)` taken.
pub struct HighWater {
    seed: Option<Seed>,
    /// Keyed per process: an emitter cannot craft an id whose hash collides with another
    /// event's and have that event dropped as its repeat.
    hasher: std::collections::hash_map::RandomState,
    inner: Mutex<Held>,
}

impl std::fmt::Debug for HighWater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HighWater").field("seeded", &self.seed.is_some()).finish_non_exhaustive()
    }
}

impl HighWater {
    /// Nothing taken yet; `seed` reads a session's tail the first time it is seen.
    pub fn new(seed: Option<Seed>) -> Self {
        Self { seed, hasher: Default::default(), inner: Mutex::new(Held::default()) }
    }

    /// `false` for a redelivery (at or below the high water of `(source, session)`, its
    /// `(source, id)` taken before); else `true`, and the event is taken: above the high
    /// water, or backfill below it.
    pub fn fresh(&self, agent: &str, source: &str, session: &str, pos: (u64, u64), id: &str) -> bool {
        let key: Key = (Box::from(source), Box::from(session));
        let h = self.hasher.hash_one((source, id));
        let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let held = &mut *g;
        let high = match held.high.get(&key) {
            Some(p) => Some(*p),
            None => {
                let tail = self.seed.as_ref().and_then(|s| s(agent, session, source));
                tail.map(|t| {
                    for id in &t.ids {
                        held.remember(self.hasher.hash_one((source, id.as_str())));
                    }
                    held.set_high(key.clone(), t.last);
                    t.last
                })
            }
        };
        let below = high.is_some_and(|s| pos <= s);
        if below && held.ids.contains(&h) {
            return false;
        }
        held.remember(h);
        held.set_high(key, high.map_or(pos, |s| s.max(pos)));
        true
    }
}

/// The [`Tail`] of a JSONL log written by `source`: its last complete line's position
/// (`None` when absent, unreadable, or another source's) and the ids of that source's
/// complete lines in its last 256 KiB.
pub fn log_tail(path: &Path, source: &str) -> Option<Tail> {
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let from = len.saturating_sub(TAIL_BYTES);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut buf = Vec::with_capacity((len - from) as usize);
    f.read_to_end(&mut buf).ok()?;
    // Only complete lines: a torn last one is not yet written; a first one cut by `from`
    // is no line either.
    let end = buf.iter().rposition(|b| *b == b'\n')?;
    let mut lines = buf[..end].split(|b| *b == b'\n');
    if from > 0 {
        lines.next();
    }
    #[derive(serde::Deserialize)]
    struct Pos {
        source: String,
        #[serde(default)]
        id: String,
        #[serde(default)]
        epoch: u64,
        seq: u64,
    }
    let mut tail = Tail::default();
    let mut last = None;
    for line in lines {
        let Ok(p) = serde_json::from_slice::<Pos>(line) else {
            last = None;
            continue;
        };
        last = (p.source == source).then_some((p.epoch, p.seq));
        if p.source == source {
            tail.ids.push(p.id);
        }
    }
    tail.last = last?;
    Some(tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_is_recognised_backfill_is_kept_and_a_restart_reads_the_log() {
        let src = "aep://lap/agent/a";
        let hw = HighWater::new(None);
        assert!(hw.fresh("a", src, "s", (5, 0), "e0"));
        assert!(hw.fresh("a", src, "s", (5, 2), "e2"));
        assert!(!hw.fresh("a", src, "s", (5, 2), "e2"), "resent");
        assert!(!hw.fresh("a", src, "s", (5, 0), "e0"), "resent, older");
        assert!(hw.fresh("a", src, "s", (5, 1), "e1"), "backfill: a position not taken yet (AEP-0001 §7 rule 2)");
        assert!(!hw.fresh("a", src, "s", (5, 1), "e1"), "and its own resend");
        assert!(hw.fresh("a", "aep://other/agent/a", "s", (5, 0), "e0"), "another source's session of the same name");
        assert!(hw.fresh("a", src, "s", (6, 0), "f0"), "the edge restarted: a new epoch");

        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("s.jsonl");
        std::fs::write(
            &log,
            "{\"source\":\"aep://lap/agent/a\",\"id\":\"e0\",\"epoch\":5,\"seq\":0}\n\
             {\"source\":\"aep://lap/agent/a\",\"id\":\"e1\",\"epoch\":5,\"seq\":1}\n{\"source\":\"aep://lap/ag",
        )
        .unwrap();
        let tail = log_tail(&log, src).unwrap();
        assert_eq!(tail, Tail { last: (5, 1), ids: vec!["e0".into(), "e1".into()] }, "the torn line is not counted");
        assert_eq!(log_tail(&log, "aep://else/agent/a"), None);
        let path = log.clone();
        let restarted = HighWater::new(Some(Box::new(move |_, _, src| log_tail(&path, src))));
        assert!(!restarted.fresh("a", src, "s", (5, 1), "e1"), "written before the restart");
        assert!(!restarted.fresh("a", src, "s", (5, 0), "e0"), "so was this one");
        assert!(restarted.fresh("a", src, "s", (5, 2), "e2"));
    }

    /// A log longer than the bytes read back: its first line there is cut, not misread.
    #[test]
    fn a_long_log_is_read_from_a_whole_line() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("s.jsonl");
        let mut text = String::new();
        for i in 0..5_000u64 {
            text.push_str(&format!("{{\"source\":\"aep://lap/agent/a\",\"id\":\"e{i}\",\"epoch\":1,\"seq\":{i}}}\n"));
        }
        std::fs::write(&log, &text).unwrap();
        let tail = log_tail(&log, "aep://lap/agent/a").unwrap();
        assert_eq!(tail.last, (1, 4_999));
        assert_eq!(tail.ids.last().map(String::as_str), Some("e4999"));
        assert!(tail.ids.len() > 1_000 && tail.ids.len() < 5_000, "{}", tail.ids.len());
        let first: u64 = tail.ids[0][1..].parse().unwrap();
        assert_eq!(tail.ids.len() as u64, 5_000 - first, "every whole line from the first one read");
    }
}
