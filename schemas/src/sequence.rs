//! Per-session `(epoch, seq)` sequencing (AEP-0001 §7).
//!
//! Pure: the durable part (remembering the last epoch across restarts) is the caller's
//! job; the bridge keeps it in a small state file and hands the new epoch in here.

use std::collections::HashMap;

/// Assigns `(epoch, seq)` positions per `(agent, session)` within one process lifetime.
///
/// One epoch per process: a restart must bump it (AEP-0001 §7 rule 2), so the caller
/// passes an epoch strictly greater than any it used before.
#[derive(Debug, Clone)]
pub struct Sequencer {
    epoch: u64,
    next: HashMap<String, HashMap<String, u64>>,
}

impl Sequencer {
    /// A sequencer for this process lifetime's `epoch`.
    pub fn new(epoch: u64) -> Self {
        Self { epoch, next: HashMap::new() }
    }

    /// The epoch of this lifetime.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Assigns the next position of `(agent, session)`: strictly increasing, never reused
    /// within the epoch (AEP-0001 §7 rule 2).
    pub fn next(&mut self, agent: &str, session: &str) -> (u64, u64) {
        // Borrowed lookups first so the hot path does not allocate.
        let sessions = match self.next.get_mut(agent) {
            Some(m) => m,
            None => self.next.entry(agent.to_owned()).or_default(),
        };
        let n = match sessions.get_mut(session) {
            Some(n) => n,
            None => sessions.entry(session.to_owned()).or_insert(0),
        };
        let seq = *n;
        *n += 1;
        (self.epoch, seq)
    }

    /// Number of sessions tracked. Sessions are never forgotten within an epoch: a
    /// forgotten session would restart at `seq` 0 and reuse a position (AEP-0001 §7 rule 2).
    pub fn len(&self) -> usize {
        self.next.values().map(HashMap::len).sum()
    }

    /// `true` when no session is tracked.
    pub fn is_empty(&self) -> bool {
        self.next.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_per_agent_and_session() {
        let mut s = Sequencer::new(3);
        assert_eq!(s.next("a", "s1"), (3, 0));
        assert_eq!(s.next("a", "s1"), (3, 1));
        assert_eq!(s.next("a", "s2"), (3, 0));
        assert_eq!(s.next("b", "s1"), (3, 0));
        assert_eq!(s.next("a", "s1"), (3, 2));
        assert_eq!(s.len(), 3);
    }
}
