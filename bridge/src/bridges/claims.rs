//! The sessions a hook channel (a vendor's plugin) delivers, per agent: a stream observer in
//! companion mode beside that plugin adds nothing for them. The plugin forwards
//! every bus event that names a session, so the stream's copy of those would only repeat it
//! (the design record's companion: the plugin is the sole authority; AEP dedupes by envelope
//! id, AEP-0001 §7.4, and the two channels' copies are different Events).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

/// Sessions remembered per agent (the oldest claim is forgotten beyond).
const MAX_SESSIONS: usize = 4096;

/// Claimed sessions per watched agent, shared by the hook receiver and the stream observers.
/// Only an agent an observer [`watch`](HookSessions::watch)es is tracked: every other
/// vendor's hook call finds no entry and records nothing.
#[derive(Debug, Default)]
pub struct HookSessions {
    inner: Mutex<HashMap<String, Claims>>,
}

#[derive(Debug, Default)]
struct Claims {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl HookSessions {
    /// Starts tracking the sessions `agent`'s hook calls deliver (a companion observer of
    /// that agent's stream asks this when it starts).
    pub fn watch(&self, agent: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.entry(agent.to_owned()).or_default();
    }

    /// Records that a hook call of `agent` delivered a moment of `session`, when an observer
    /// watches `agent`; otherwise nothing (no allocation on the hook path).
    pub fn claim(&self, agent: &str, session: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(c) = inner.get_mut(agent) else { return };
        if c.set.contains(session) {
            return;
        }
        if c.order.len() >= MAX_SESSIONS
            && let Some(old) = c.order.pop_front()
        {
            c.set.remove(&old);
        }
        c.set.insert(session.to_owned());
        c.order.push_back(session.to_owned());
    }

    /// Whether a hook call of `agent` delivered any moment of `session`.
    pub fn claimed(&self, agent: &str, session: &str) -> bool {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.get(agent).is_some_and(|c| c.set.contains(session))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_per_agent_and_bounded() {
        let h = HookSessions::default();
        h.claim("opencode", "s0");
        assert!(!h.claimed("opencode", "s0"), "an agent no observer watches is not tracked");
        h.watch("opencode");
        h.claim("opencode", "s1");
        assert!(h.claimed("opencode", "s1"));
        assert!(!h.claimed("kilocode", "s1") && !h.claimed("opencode", "s2"));
        for i in 0..MAX_SESSIONS {
            h.claim("opencode", &format!("x{i}"));
        }
        assert!(!h.claimed("opencode", "s1"), "the oldest claim is forgotten");
        assert!(h.claimed("opencode", &format!("x{}", MAX_SESSIONS - 1)));
    }
}
