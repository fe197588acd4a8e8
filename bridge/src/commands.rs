//! The control command channel, created before anything that can receive a command: the
//! embedded collector and the relay binding hold [`Commands`] senders, the control loop
//! owns the [`Inbox`]. Nothing is bound late, and no module that receives commands needs
//! to know the control loop.
//!
//! The channel also carries the sessions this process owns (AEP-0004 §4.2: a command is
//! routed to the one live claimant of its session), written by the control loop as it
//! maps hooks and read by the collector for routing and the roster.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use aep_schemas::Event;
use tokio::sync::mpsc;

/// The command types this bridge honours (`control.accepts`, AEP-0003 §4 rule 5).
pub const ACCEPTS: [&str; 1] = ["control.attention.respond"];

/// Commands queued for the control loop before a sender is refused.
pub const CAPACITY: usize = 1024;

/// Sessions this process owns (maps hooks for): session -> agent.
#[derive(Debug, Default)]
pub struct Owned(Mutex<HashMap<String, String>>);

impl Owned {
    /// The agent emitting `session`, when this process owns it.
    pub fn agent_of(&self, session: &str) -> Option<String> {
        self.0.lock().ok()?.get(session).cloned()
    }

    /// Claims `session` for `agent`.
    pub fn claim(&self, session: &str, agent: &str) {
        if let Ok(mut m) = self.0.lock()
            && m.get(session).is_none_or(|a| a != agent)
        {
            m.insert(session.to_owned(), agent.to_owned());
        }
    }

    /// Releases `session` (it ended).
    pub fn release(&self, session: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(session);
        }
    }

    /// Every owned session with its agent.
    pub fn all(&self) -> Vec<(String, String)> {
        self.0.lock().map(|m| m.iter().map(|(s, a)| (s.clone(), a.clone())).collect()).unwrap_or_default()
    }
}

/// Why a command could not be queued.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SendError {
    /// The control loop has this many commands waiting already.
    #[error("the control loop is busy ({CAPACITY} commands queued)")]
    Busy,
    /// The control loop has stopped (shutting down).
    #[error("the control loop has stopped")]
    Closed,
}

/// The sending side: cheap to clone, held by every binding that receives commands.
#[derive(Debug, Clone)]
pub struct Commands {
    tx: mpsc::Sender<Event>,
    owned: Arc<Owned>,
    read_only: ReadOnly,
}

/// Agent identities that take no command at all (their declarations say
/// `control: { accepts: [] }`), fixed when the channel is made.
#[derive(Debug, Clone, Default)]
pub struct ReadOnly(Arc<HashSet<String>>);

impl ReadOnly {
    /// The command types `agent` honours: none when it is read-only, else [`ACCEPTS`].
    pub fn accepts(&self, agent: &str) -> &'static [&'static str] {
        if self.0.contains(agent) { &[] } else { &ACCEPTS }
    }
}

/// The receiving side, owned by the control loop.
#[derive(Debug)]
pub struct Inbox {
    /// Commands in arrival order.
    pub rx: mpsc::Receiver<Event>,
    /// The owned-session table the loop keeps current.
    pub owned: Arc<Owned>,
    /// The agents that take no command (the loop refuses theirs as `unsupported`).
    pub read_only: ReadOnly,
}

/// A new command channel of [`CAPACITY`] where every agent honours [`ACCEPTS`].
#[cfg(test)]
pub fn channel() -> (Commands, Inbox) {
    channel_with(HashSet::new())
}

/// A new command channel of [`CAPACITY`] where the `read_only` agents honour no command
/// (the read-only bridges' identities: [`crate::bridges::read_only_agents`]).
pub fn channel_with(read_only: HashSet<String>) -> (Commands, Inbox) {
    let (tx, rx) = mpsc::channel(CAPACITY);
    let owned = Arc::new(Owned::default());
    let read_only = ReadOnly(Arc::new(read_only));
    (Commands { tx, owned: owned.clone(), read_only: read_only.clone() }, Inbox { rx, owned, read_only })
}

impl Commands {
    /// Queues a command for the control loop; acks and outcomes come back as events.
    pub fn send(&self, cmd: Event) -> Result<(), SendError> {
        self.tx.try_send(cmd).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => SendError::Busy,
            mpsc::error::TrySendError::Closed(_) => SendError::Closed,
        })
    }

    /// `true` when this process owns `session` and takes commands for it.
    pub fn owns(&self, session: &str) -> bool {
        self.owned.agent_of(session).is_some()
    }

    /// The agent of `session`, when this process owns it.
    pub fn agent_of(&self, session: &str) -> Option<String> {
        self.owned.agent_of(session)
    }

    /// The sessions owned now, each with its agent (roster entries, AEP-0003 §4.1).
    pub fn claims(&self) -> Vec<(String, String)> {
        self.owned.all()
    }

    /// The command types honoured by some agent of this process (an endpoint's `hello`).
    pub fn accepts(&self) -> Vec<String> {
        ACCEPTS.iter().map(|s| (*s).to_owned()).collect()
    }

    /// The command types `agent` honours (its `hello` to a relay and its roster entries,
    /// AEP-0004 §4.2: declared accepts are authoritative): none for a read-only identity.
    pub fn accepts_for(&self, agent: &str) -> Vec<String> {
        self.read_only.accepts(agent).iter().map(|s| (*s).to_owned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_or_closed_inbox_refuses_instead_of_waiting() {
        let (commands, mut inbox) = channel();
        for _ in 0..CAPACITY {
            commands.send(Event::default()).unwrap();
        }
        assert_eq!(commands.send(Event::default()), Err(SendError::Busy));
        assert!(inbox.rx.recv().await.is_some());
        commands.send(Event::default()).unwrap();
        inbox.owned.claim("s", "codex");
        assert!(commands.owns("s") && !commands.owns("t"));
        assert_eq!(commands.claims(), [("s".to_owned(), "codex".to_owned())]);
        inbox.owned.release("s");
        assert!(!commands.owns("s"));
        drop(inbox);
        assert_eq!(commands.send(Event::default()), Err(SendError::Closed));
    }
}
