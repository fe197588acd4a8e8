//! The control command channel, created before anything that can receive a command: the
//! embedded collector and the relay binding hold [`Commands`] senders, the control loop
//! owns the [`Inbox`]. Nothing is bound late, and no module that receives commands needs
//! to know the control loop.
//!
//! The channel also carries the sessions this process owns (AEP-0004 §4.2: a command is
//! routed to the one live claimant of its session), written by the control loop as it
//! maps hooks and read by the collector for routing and the roster.

use std::collections::HashMap;
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
}

/// The receiving side, owned by the control loop.
#[derive(Debug)]
pub struct Inbox {
    /// Commands in arrival order.
    pub rx: mpsc::Receiver<Event>,
    /// The owned-session table the loop keeps current.
    pub owned: Arc<Owned>,
}

/// A new command channel of [`CAPACITY`].
pub fn channel() -> (Commands, Inbox) {
    let (tx, rx) = mpsc::channel(CAPACITY);
    let owned = Arc::new(Owned::default());
    (Commands { tx, owned: owned.clone() }, Inbox { rx, owned })
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

    /// The sessions owned now, each with its agent (roster entries, AEP-0003 §4.1).
    pub fn claims(&self) -> Vec<(String, String)> {
        self.owned.all()
    }

    /// The command types honoured (`control.accepts`).
    pub fn accepts(&self) -> Vec<String> {
        ACCEPTS.iter().map(|s| (*s).to_owned()).collect()
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
