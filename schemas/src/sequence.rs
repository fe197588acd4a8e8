//! Per-session `(epoch, seq)` sequencing (AEP-0001 §7).
//!
//! Pure: the durable part (remembering the last epoch across restarts) is the caller's
//! job; the bridge keeps it in a small state file and hands the new epoch in here.

use std::collections::HashMap;

/// Assigns `(epoch, seq)` positions per `(agent, session)` within one process lifetime.
///
/// One epoch per process: a restart must bump it (AEP-0001 §7 rule 2), so the caller
/// passes an epoch strictly greater than any it used before.
///
/// Each session may carry a payload `T` of the caller's (the bridge keeps the session's
/// `source` URI there), found by the same lookup that assigns the position.
#[derive(Debug, Clone)]
pub struct Sequencer<T = ()> {
    epoch: u64,
    /// Agent -> index into `per_agent`.
    agents: HashMap<String, usize>,
    per_agent: Vec<AgentSessions<T>>,
    /// The last `(agent, session)` looked up and where it is: consecutive events mostly
    /// belong to one session, which then costs two string comparisons instead of two hashes.
    last: Option<(String, String, usize, usize)>,
}

/// One agent's sessions: session -> index into `slots` (next seq, payload). Indexes rather
/// than references keep the lookup to one hash per level, with no allocation once seen.
#[derive(Debug, Clone)]
struct AgentSessions<T> {
    index: HashMap<String, usize>,
    slots: Vec<(u64, T)>,
}

impl<T: Default> Sequencer<T> {
    /// A sequencer for this process lifetime's `epoch`.
    pub fn new(epoch: u64) -> Self {
        Self { epoch, agents: HashMap::new(), per_agent: Vec::new(), last: None }
    }

    /// The epoch of this lifetime.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Assigns the next position of `(agent, session)`: strictly increasing, never reused
    /// within the epoch (AEP-0001 §7 rule 2).
    pub fn next(&mut self, agent: &str, session: &str) -> (u64, u64) {
        let (epoch, seq, _) = self.next_with(agent, session);
        (epoch, seq)
    }

    /// [`Sequencer::next`], also handing back the session's payload (`T::default()` the
    /// first time the session is seen).
    pub fn next_with(&mut self, agent: &str, session: &str) -> (u64, u64, &mut T) {
        let (a, i) = match &self.last {
            Some((la, ls, a, i)) if la == agent && ls == session => (*a, *i),
            _ => self.lookup(agent, session),
        };
        let (n, payload) = &mut self.per_agent[a].slots[i];
        let seq = *n;
        *n += 1;
        (self.epoch, seq, payload)
    }

    /// Where `(agent, session)` is (added when new), remembered as the last one seen.
    fn lookup(&mut self, agent: &str, session: &str) -> (usize, usize) {
        let a = match self.agents.get(agent) {
            Some(&a) => a,
            None => {
                self.per_agent.push(AgentSessions { index: HashMap::new(), slots: Vec::new() });
                self.agents.insert(agent.to_owned(), self.per_agent.len() - 1);
                self.per_agent.len() - 1
            }
        };
        let sessions = &mut self.per_agent[a];
        let i = match sessions.index.get(session) {
            Some(&i) => i,
            None => {
                sessions.slots.push((0, T::default()));
                sessions.index.insert(session.to_owned(), sessions.slots.len() - 1);
                sessions.slots.len() - 1
            }
        };
        match &mut self.last {
            Some((la, ls, la_i, ls_i)) => {
                la.clear();
                la.push_str(agent);
                ls.clear();
                ls.push_str(session);
                (*la_i, *ls_i) = (a, i);
            }
            None => self.last = Some((agent.to_owned(), session.to_owned(), a, i)),
        }
        (a, i)
    }

    /// Number of sessions tracked. Sessions are never forgotten within an epoch: a
    /// forgotten session would restart at `seq` 0 and reuse a position (AEP-0001 §7 rule 2).
    pub fn len(&self) -> usize {
        self.per_agent.iter().map(|a| a.slots.len()).sum()
    }

    /// `true` when no session is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_per_agent_and_session() {
        let mut s = Sequencer::<()>::new(3);
        assert_eq!(s.next("a", "s1"), (3, 0));
        assert_eq!(s.next("a", "s1"), (3, 1));
        assert_eq!(s.next("a", "s2"), (3, 0));
        assert_eq!(s.next("b", "s1"), (3, 0));
        assert_eq!(s.next("a", "s1"), (3, 2));
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn keeps_a_payload_per_session() {
        let mut s: Sequencer<String> = Sequencer::new(0);
        let (_, seq, p) = s.next_with("a", "s1");
        assert_eq!((seq, p.as_str()), (0, ""));
        p.push_str("uri");
        let (_, seq, p) = s.next_with("a", "s1");
        assert_eq!((seq, p.as_str()), (1, "uri"));
        assert_eq!(s.next_with("a", "s2").2.as_str(), "");
    }
}
