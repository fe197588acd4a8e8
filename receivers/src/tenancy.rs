//! Which tenant each session belongs to, on a hub: the tenant of the token that first
//! emitted it (see [`crate::access`]), never anything the event itself says, so an edge
//! cannot move its sessions into another team's view, nor write into another team's
//! session (its events are refused there, AEP-0004 §4.2 item 3's `unauthorized`).
//!
//! Kept in `{data}/state/tenants.jsonl`, one line per session as it is first claimed, so a
//! restarted hub still shows each team its own history and routes its answers. Sessions
//! nobody claimed (the hub's own agents) belong to the hub's local tenant (`[fleet] team`),
//! or to no tenant: then only the operator sees them.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// Sessions remembered at most; past it the earliest claimed are forgotten first (they then
/// count as the local tenant's, visible to the operator only when it has none).
pub const MAX_KEYS: usize = 262_144;

/// One remembered claim per line of the file.
#[derive(serde::Serialize, serde::Deserialize)]
struct Line {
    /// `s:{session}`, or `src:{source}` for events without a session.
    k: String,
    /// The tenant.
    t: String,
}

#[derive(Default)]
struct Inner {
    map: HashMap<Box<str>, Arc<str>>,
    order: VecDeque<Box<str>>,
    file: Option<std::fs::File>,
}

/// The session-to-tenant map of a hub.
pub struct Tenancy {
    local: Option<Arc<str>>,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Tenancy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tenancy").field("local", &self.local).finish_non_exhaustive()
    }
}

fn key(session: Option<&str>, source: &str) -> String {
    match session {
        Some(s) => format!("s:{s}"),
        None => format!("src:{source}"),
    }
}

impl Tenancy {
    /// An empty map in memory only (a bridge without an access list, a test).
    pub fn memory(local: Option<&str>) -> Self {
        Self { local: local.filter(|t| !t.is_empty()).map(Arc::from), inner: Mutex::new(Inner::default()) }
    }

    /// The map kept in `path` (read back first; a torn last line is skipped, the rest kept).
    /// A file that cannot be opened leaves the map in memory, said once.
    pub fn open(path: &Path, local: Option<&str>) -> Self {
        let me = Self::memory(local);
        let mut inner = me.lock();
        let mut lines = 0usize;
        let mut torn = false;
        if let Ok(text) = std::fs::read_to_string(path) {
            torn = !text.is_empty() && !text.ends_with('\n');
            for l in text.lines() {
                lines += 1;
                if let Ok(Line { k, t }) = serde_json::from_str::<Line>(l) {
                    remember(&mut inner, k.into_boxed_str(), Arc::from(t.as_str()));
                }
            }
        }
        // Rewritten when mostly forgotten or repeated lines, so the file stays near the map.
        if lines > 2 * inner.map.len().max(1024) {
            let _ = rewrite(path, &inner);
        }
        match append(path) {
            Ok(mut f) => {
                // A torn last line is ended, so the next claim starts a line of its own.
                if torn {
                    let _ = f.write_all(b"\n");
                }
                inner.file = Some(f);
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "The tenants file cannot be written: a restart forgets which team owns which session.")
            }
        }
        drop(inner);
        me
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims the event's session (or, without one, its source) for `tenant`: `Ok` when it
    /// is new (remembered, and written down) or already the tenant's, `Err(owner)` when
    /// another tenant owns it.
    pub fn claim(&self, session: Option<&str>, source: &str, tenant: &Arc<str>) -> Result<(), Arc<str>> {
        let k = key(session, source);
        let mut inner = self.lock();
        if let Some(owner) = inner.map.get(k.as_str()) {
            return if owner == tenant { Ok(()) } else { Err(owner.clone()) };
        }
        if let Some(f) = inner.file.as_mut() {
            let mut line = serde_json::to_vec(&Line { k: k.clone(), t: tenant.to_string() }).unwrap_or_default();
            line.push(b'\n');
            if let Err(e) = f.write_all(&line) {
                tracing::warn!(error = %e, "A session's tenant could not be written down.");
            }
        }
        remember(&mut inner, k.into_boxed_str(), tenant.clone());
        Ok(())
    }

    /// The tenant the event's session (or source) belongs to: its claimant's, else the
    /// local one.
    pub fn tenant_of(&self, session: Option<&str>, source: &str) -> Option<Arc<str>> {
        let k = key(session, source);
        self.lock().map.get(k.as_str()).cloned().or_else(|| self.local.clone())
    }

    /// Sessions remembered.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn remember(inner: &mut Inner, k: Box<str>, t: Arc<str>) {
    if inner.map.insert(k.clone(), t).is_none() {
        inner.order.push_back(k);
    }
    while inner.order.len() > MAX_KEYS {
        if let Some(old) = inner.order.pop_front() {
            inner.map.remove(&old);
        }
    }
}

fn append(path: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.append(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    opts.open(path)
}

fn rewrite(path: &Path, inner: &Inner) -> std::io::Result<()> {
    let tmp: PathBuf = path.with_extension("jsonl.tmp");
    let mut out = Vec::new();
    for k in &inner.order {
        if let Some(t) = inner.map.get(k) {
            let _ = serde_json::to_writer(&mut out, &Line { k: k.to_string(), t: t.to_string() });
            out.push(b'\n');
        }
    }
    std::fs::write(&tmp, out)?;
    std::fs::rename(tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_tenant_owns_a_session_and_a_restart_remembers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/tenants.jsonl");
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("team-a"), Arc::from("team-b"));
        let t = Tenancy::open(&path, Some("hub-team"));
        assert_eq!(t.claim(Some("s1"), "aep://lap-1/agent/x", &a), Ok(()));
        assert_eq!(t.claim(Some("s1"), "aep://lap-1/agent/x", &a), Ok(()), "its own again");
        assert_eq!(t.claim(Some("s1"), "aep://lap-9/agent/x", &b), Err(a.clone()), "another tenant's session");
        assert_eq!(t.claim(None, "aep://lap-2/agent/y", &b), Ok(()));
        assert_eq!(t.tenant_of(Some("s1"), "whatever").as_deref(), Some("team-a"));
        assert_eq!(t.tenant_of(None, "aep://lap-2/agent/y").as_deref(), Some("team-b"));
        assert_eq!(t.tenant_of(Some("local-s"), "aep://hub/agent/x").as_deref(), Some("hub-team"));
        drop(t);
        // A torn last line (a crash mid-write) is skipped; the rest is kept.
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{\"k\":\"s:s9\",\"t\":\"te").unwrap();
        let again = Tenancy::open(&path, None);
        assert_eq!(again.tenant_of(Some("s1"), "").as_deref(), Some("team-a"));
        assert_eq!(again.claim(Some("s1"), "", &b), Err(a));
        assert_eq!(again.tenant_of(Some("s9"), ""), None, "no local tenant: the operator's alone");
        assert_eq!(again.len(), 2);
        assert_eq!(again.claim(Some("s10"), "", &Arc::from("team-c")), Ok(()));
        drop(again);
        assert_eq!(
            Tenancy::open(&path, None).tenant_of(Some("s10"), "").as_deref(),
            Some("team-c"),
            "a claim after a torn line is read back"
        );
    }
}
