//! The web view's cookie sessions: a login exchanges the token once for a random secret the
//! browser keeps in an `HttpOnly` cookie, so the token is never in a URL, a page or script
//! memory. Each page load mints a nonce bound to its session for the answers it posts.
//!
//! Kept in `{data}/ui-sessions.json` (mode 0600) so a restarted bridge keeps its logged-in
//! pages; at most [`MAX_SESSIONS`], the least recently used forgotten first.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::auth::constant_time_eq;

/// Most cookie sessions held; past it the least recently used is forgotten.
pub const MAX_SESSIONS: usize = 64;

/// Most page nonces one session holds (one per open tab or reload); the oldest goes first.
const MAX_NONCES: usize = 16;

/// How long a session lasts without being used, milliseconds (a week).
const IDLE_MS: u64 = 7 * 24 * 3600 * 1000;

/// Bytes of randomness in a secret or a nonce.
const SECRET_BYTES: usize = 32;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Session {
    secret: String,
    seen_ms: u64,
    nonces: VecDeque<String>,
    /// Who logged in: the access entry's name (`operator` for the bridge's own token);
    /// empty in sessions kept before access lists existed (the operator's, or anonymous).
    #[serde(default)]
    who: String,
}

/// Why a secret could not be minted.
#[derive(Debug, thiserror::Error)]
#[error("the OS random source failed: {0}")]
pub struct RandomError(String);

/// The cookie sessions of the web view.
#[derive(Debug, Default)]
pub struct Sessions {
    path: Option<PathBuf>,
    held: Mutex<Vec<Session>>,
}

/// A fresh random hex string from the OS source.
fn random() -> Result<String, RandomError> {
    let mut b = [0u8; SECRET_BYTES];
    getrandom::fill(&mut b).map_err(|e| RandomError(e.to_string()))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

impl Sessions {
    /// Sessions kept in `path` (read now, written on every change); `None` keeps them in
    /// memory only.
    pub fn new(path: Option<PathBuf>, now_ms: u64) -> Self {
        let held: Vec<Session> = path
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let held = held
            .into_iter()
            .filter(|s| s.seen_ms.saturating_add(IDLE_MS) >= now_ms && s.secret.len() == 2 * SECRET_BYTES)
            .take(MAX_SESSIONS)
            .collect();
        Self { path, held: Mutex::new(held) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Session>> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes the table (best effort: a failure costs a login after a restart, nothing more).
    fn save(&self, held: &[Session]) {
        let Some(path) = &self.path else { return };
        let Ok(bytes) = serde_json::to_vec(held) else { return };
        let tmp = path.with_extension("json.tmp");
        let written = (|| -> std::io::Result<()> {
            let mut opts = std::fs::OpenOptions::new();
            opts.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
            std::io::Write::write_all(&mut opts.open(&tmp)?, &bytes)?;
            std::fs::rename(&tmp, path)
        })();
        if let Err(e) = written {
            tracing::warn!(error = %e, "The web view's sessions could not be saved.");
        }
    }

    /// Starts a session; returns its secret (the cookie value).
    pub fn create(&self, now_ms: u64) -> Result<String, RandomError> {
        self.create_for(now_ms, "")
    }

    /// A new session for `who` (an access entry's name), as [`Sessions::create`].
    pub fn create_for(&self, now_ms: u64, who: &str) -> Result<String, RandomError> {
        let secret = random()?;
        let mut held = self.lock();
        held.retain(|s| s.seen_ms.saturating_add(IDLE_MS) >= now_ms);
        if held.len() >= MAX_SESSIONS {
            // Forget the least recently used.
            if let Some(i) = held.iter().enumerate().min_by_key(|(_, s)| s.seen_ms).map(|(i, _)| i) {
                held.remove(i);
            }
        }
        held.push(Session { secret: secret.clone(), seen_ms: now_ms, nonces: VecDeque::new(), who: who.to_owned() });
        self.save(&held);
        Ok(secret)
    }

    fn find<'a>(held: &'a mut [Session], secret: &str, now_ms: u64) -> Option<&'a mut Session> {
        held.iter_mut().find(|s| {
            constant_time_eq(s.secret.as_bytes(), secret.as_bytes()) && s.seen_ms.saturating_add(IDLE_MS) >= now_ms
        })
    }

    /// Who a live session belongs to (see [`Sessions::create_for`]), touching it as
    /// [`Sessions::valid`] does.
    pub fn who(&self, secret: &str, now_ms: u64) -> Option<String> {
        let mut held = self.lock();
        let s = Self::find(&mut held, secret, now_ms)?;
        s.seen_ms = now_ms;
        Some(s.who.clone())
    }

    /// Whether `secret` names a live session (and marks it used).
    pub fn valid(&self, secret: &str, now_ms: u64) -> bool {
        let mut held = self.lock();
        match Self::find(&mut held, secret, now_ms) {
            Some(s) => {
                s.seen_ms = now_ms;
                true
            }
            None => false,
        }
    }

    /// A new page nonce bound to the session `secret`; `None` when it is not live.
    pub fn nonce(&self, secret: &str, now_ms: u64) -> Option<String> {
        let nonce = random().ok()?;
        let mut held = self.lock();
        let s = Self::find(&mut held, secret, now_ms)?;
        s.seen_ms = now_ms;
        s.nonces.push_back(nonce.clone());
        while s.nonces.len() > MAX_NONCES {
            s.nonces.pop_front();
        }
        self.save(&held);
        Some(nonce)
    }

    /// Whether `nonce` was minted for the session `secret`.
    pub fn nonce_ok(&self, secret: &str, nonce: &str, now_ms: u64) -> bool {
        let mut held = self.lock();
        Self::find(&mut held, secret, now_ms)
            .is_some_and(|s| s.nonces.iter().any(|n| constant_time_eq(n.as_bytes(), nonce.as_bytes())))
    }

    /// Ends the session `secret`.
    pub fn remove(&self, secret: &str) {
        let mut held = self.lock();
        held.retain(|s| !constant_time_eq(s.secret.as_bytes(), secret.as_bytes()));
        self.save(&held);
    }

    /// Sessions held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_capped_and_nonces_bound_to_their_session() {
        let s = Sessions::new(None, 0);
        let first = s.create(1).unwrap();
        let mut last = String::new();
        for i in 0..MAX_SESSIONS {
            last = s.create(2 + i as u64).unwrap();
        }
        assert_eq!(s.len(), MAX_SESSIONS);
        assert!(!s.valid(&first, 100), "the least recently used was forgotten");
        let n = s.nonce(&last, 100).unwrap();
        assert!(s.nonce_ok(&last, &n, 100));
        let other = s.create(101).unwrap();
        assert!(!s.nonce_ok(&other, &n, 101), "a nonce is bound to its own session");
        assert!(!s.valid(&last, 100 + IDLE_MS + 1), "an idle session expires");
    }

    #[test]
    fn sessions_survive_a_restart_in_their_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ui-sessions.json");
        let a = Sessions::new(Some(path.clone()), 0);
        let secret = a.create(5).unwrap();
        let nonce = a.nonce(&secret, 6).unwrap();
        let b = Sessions::new(Some(path.clone()), 7);
        assert!(b.valid(&secret, 7) && b.nonce_ok(&secret, &nonce, 7));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }
}
