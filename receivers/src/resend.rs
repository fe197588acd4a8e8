//! Resent events recognised on arrival: an edge bridge resends what its hub had not
//! confirmed when the link dropped (the hub restarting, a network cut), so the hub may get
//! an event it already wrote. Each emitter's session is sequenced (AEP-0001 §5.3: `(epoch,
//! seq)` rises), so an event at or below the highest position taken from that source for
//! that session is a repeat, dropped before it reaches a log twice.
//!
//! The highest position survives a restart of the hub through `seed`, which reads it back
//! from where the hub wrote the session (the last line of its JSONL log).

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

/// Sessions remembered at most; one forgotten is read back from `seed` when seen again.
pub const MAX_SESSIONS: usize = 65_536;

/// Reads a session's highest written position: `(agent, session, source)` to `(epoch, seq)`.
pub type Seed = Box<dyn Fn(&str, &str, &str) -> Option<(u64, u64)> + Send + Sync>;

/// `(source, session)`.
type Key = (Box<str>, Box<str>);

/// The positions, and their keys in the order first seen (the oldest forgotten first).
type Held = (HashMap<Key, (u64, u64)>, VecDeque<Key>);

/// The highest `(epoch, seq)` taken per `(source, session)`.
pub struct HighWater {
    seed: Option<Seed>,
    inner: Mutex<Held>,
}

impl std::fmt::Debug for HighWater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HighWater").field("seeded", &self.seed.is_some()).finish_non_exhaustive()
    }
}

impl HighWater {
    /// An empty map; `seed` reads a session's last written position the first time it is seen.
    pub fn new(seed: Option<Seed>) -> Self {
        Self { seed, inner: Mutex::new((HashMap::new(), VecDeque::new())) }
    }

    /// `true` when the event at `pos` of `(source, session)` is new (and takes it as the
    /// highest), `false` for a repeat of one already taken.
    pub fn fresh(&self, agent: &str, source: &str, session: &str, pos: (u64, u64)) -> bool {
        let key: Key = (Box::from(source), Box::from(session));
        let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let (map, order) = &mut *g;
        let seen = match map.get(&key) {
            Some(p) => Some(*p),
            None => self.seed.as_ref().and_then(|s| s(agent, session, source)),
        };
        if seen.is_some_and(|s| pos <= s) {
            return false;
        }
        if map.insert(key.clone(), pos).is_none() {
            order.push_back(key);
            while order.len() > MAX_SESSIONS {
                if let Some(old) = order.pop_front() {
                    map.remove(&old);
                }
            }
        }
        true
    }
}

/// The `(epoch, seq)` of the last complete line of a JSONL log written by `source`, read
/// from its last 64 KiB (`None` when absent, unreadable, or another source's).
pub fn last_position(path: &Path, source: &str) -> Option<(u64, u64)> {
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let from = len.saturating_sub(64 * 1024);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut buf = Vec::with_capacity((len - from) as usize);
    f.read_to_end(&mut buf).ok()?;
    // Only complete lines: a torn last one is not yet written.
    let end = buf.iter().rposition(|b| *b == b'\n')?;
    let line = buf[..end].rsplit(|b| *b == b'\n').next()?;
    #[derive(serde::Deserialize)]
    struct Pos {
        source: String,
        #[serde(default)]
        epoch: u64,
        seq: u64,
    }
    let p: Pos = serde_json::from_slice(line).ok()?;
    (p.source == source).then_some((p.epoch, p.seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_is_recognised_and_a_restart_reads_the_log() {
        let hw = HighWater::new(None);
        assert!(hw.fresh("a", "aep://lap/agent/a", "s", (5, 0)));
        assert!(hw.fresh("a", "aep://lap/agent/a", "s", (5, 1)));
        assert!(!hw.fresh("a", "aep://lap/agent/a", "s", (5, 1)), "resent");
        assert!(!hw.fresh("a", "aep://lap/agent/a", "s", (5, 0)), "resent, older");
        assert!(hw.fresh("a", "aep://other/agent/a", "s", (5, 0)), "another source's session of the same name");
        assert!(hw.fresh("a", "aep://lap/agent/a", "s", (6, 0)), "the edge restarted: a new epoch");

        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("s.jsonl");
        std::fs::write(
            &log,
            "{\"source\":\"aep://lap/agent/a\",\"epoch\":5,\"seq\":0}\n{\"source\":\"aep://lap/agent/a\",\"epoch\":5,\"seq\":1}\n{\"source\":\"aep://lap/ag",
        )
        .unwrap();
        assert_eq!(last_position(&log, "aep://lap/agent/a"), Some((5, 1)), "the torn line is not counted");
        assert_eq!(last_position(&log, "aep://else/agent/a"), None);
        let path = log.clone();
        let restarted = HighWater::new(Some(Box::new(move |_, _, src| last_position(&path, src))));
        assert!(!restarted.fresh("a", "aep://lap/agent/a", "s", (5, 1)), "written before the restart");
        assert!(restarted.fresh("a", "aep://lap/agent/a", "s", (5, 2)));
    }
}
