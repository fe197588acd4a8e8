//! The shim's memory of a hung bridge: one small file per bridge URL, no daemon.
//!
//! A bridge whose socket accepts but that answers nothing (stopped, in a debugger, swapping)
//! costs each hook the whole deadline. After one exchange timed out, the hooks of the next
//! cool-down use a short deadline instead; the first answer ends it (the file is removed).
//! The cool-down doubles with each full-deadline timeout after one (30 s, 60 s, ... 5 min),
//! so a bridge hung for an hour costs a full deadline a few times, not on every hook.
//!
//! The file lives in the user's runtime directory (`$XDG_RUNTIME_DIR`, else `~/.aep`;
//! `AEP_HOOK_STATE_DIR` overrides), never a shared one: it is opened without following a
//! symlink, created `0600`, and read only when it and its directory belong to the same
//! user and nobody else can write them. Whatever goes wrong with it, the shim just has no
//! memory (every hook gets the full deadline): never an error, never a wait.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The cool-down after a first timed-out exchange.
pub const COOLDOWN_MS: u64 = 30_000;
/// The longest cool-down, however often the bridge timed out.
pub const MAX_COOLDOWN_MS: u64 = 300_000;

/// What the file says: when the last full-deadline exchange timed out, and how many did in
/// a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tripped {
    /// Unix ms of the last timeout.
    pub at_ms: u64,
    /// Timeouts in a row (1 after the first).
    pub strikes: u32,
}

impl Tripped {
    /// The cool-down this many strikes earn, from a base of `base_ms`.
    pub fn cooldown_ms(&self, base_ms: u64) -> u64 {
        let doubled = base_ms.saturating_mul(1u64 << self.strikes.saturating_sub(1).min(16));
        doubled.min(MAX_COOLDOWN_MS.max(base_ms))
    }

    /// Whether the cool-down still runs at `now_ms`.
    pub fn cooling(&self, now_ms: u64, base_ms: u64) -> bool {
        now_ms < self.at_ms.saturating_add(self.cooldown_ms(base_ms))
    }
}

/// The state file of one bridge URL.
pub struct Breaker {
    path: Option<PathBuf>,
    /// What the file held when the shim started.
    pub state: Option<Tripped>,
}

/// FNV-1a over the URL: the file's name, so two bridges keep apart.
fn key(url: &str) -> u64 {
    url.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

impl Breaker {
    /// The state file for `url` in `dir` (see the module doc for which); reads it.
    pub fn load(dir: Option<PathBuf>, url: &str) -> Self {
        let path = dir.map(|d| d.join(format!("aep-hook-{:016x}.state", key(url))));
        let state = path.as_deref().and_then(read);
        Self { path, state }
    }

    /// Records a timed-out full-deadline exchange at `now_ms`: one more strike when the last
    /// one was recent (within twice its cool-down), else the first.
    pub fn trip(&mut self, now_ms: u64, base_ms: u64) {
        let strikes = match self.state {
            Some(t) if now_ms < t.at_ms.saturating_add(2 * t.cooldown_ms(base_ms)) => t.strikes.saturating_add(1),
            _ => 1,
        };
        let t = Tripped { at_ms: now_ms, strikes };
        if let Some(p) = &self.path
            && write(p, t).is_some()
        {
            self.state = Some(t);
        }
    }

    /// The bridge answered: the cool-down ends.
    pub fn recover(&mut self) {
        if self.state.take().is_some()
            && let Some(p) = &self.path
        {
            // unlink never follows a symlink.
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The directory's owner when nobody but it (and root) can write there.
fn private_dir(dir: &Path) -> Option<u32> {
    let m = std::fs::metadata(dir).ok()?;
    (m.is_dir() && m.permissions().mode() & 0o022 == 0).then(|| m.uid())
}

/// Whether an open file is the user's own state file: a regular file, one link, owned by
/// the directory's owner, readable and writable by nobody else.
fn own_file(f: &File, owner: u32) -> bool {
    f.metadata().is_ok_and(|m| m.is_file() && m.nlink() == 1 && m.uid() == owner && m.mode() & 0o077 == 0)
}

fn read(path: &Path) -> Option<Tripped> {
    // The file first: on nearly every call there is none, and that is one failed open.
    let mut f = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path).ok()?;
    let owner = private_dir(path.parent()?)?;
    if !own_file(&f, owner) {
        return None;
    }
    let mut buf = [0u8; 64];
    let n = f.read(&mut buf).ok()?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    let mut parts = text.split_whitespace();
    let at_ms = parts.next()?.parse().ok()?;
    let strikes = parts.next()?.parse().ok()?;
    Some(Tripped { at_ms, strikes })
}

fn write(path: &Path, t: Tripped) -> Option<()> {
    let dir = path.parent()?;
    if !dir.exists() {
        // `~/.aep` on a machine where the bridge never ran: the user's own, private.
        std::fs::DirBuilder::new().mode(0o700).create(dir).ok()?;
    }
    let owner = private_dir(dir)?;
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !own_file(&f, owner) {
        return None;
    }
    f.set_len(0).ok()?;
    f.write_all(format!("{} {}\n", t.at_ms, t.strikes).as_bytes()).ok()
}

/// The state directory: `AEP_HOOK_STATE_DIR`, else `$XDG_RUNTIME_DIR`, else `~/.aep`.
pub fn state_dir(explicit: Option<PathBuf>, runtime: Option<PathBuf>, home: Option<PathBuf>) -> Option<PathBuf> {
    let absolute = |p: PathBuf| p.is_absolute().then_some(p);
    explicit
        .and_then(absolute)
        .or_else(|| runtime.and_then(absolute))
        .or_else(|| home.and_then(absolute).map(|h| h.join(".aep")))
}

/// A deadline in milliseconds, for the wire.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "aep-hook-breaker-{}-{}",
            std::process::id(),
            key(&format!("{:?}", std::time::Instant::now()))
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&d).unwrap();
        d
    }

    #[test]
    fn a_trip_is_remembered_doubles_and_ends_with_an_answer() {
        let d = dir();
        let mut b = Breaker::load(Some(d.clone()), "http://127.0.0.1:8787");
        assert_eq!(b.state, None);
        b.trip(1_000, COOLDOWN_MS);
        let b2 = Breaker::load(Some(d.clone()), "http://127.0.0.1:8787");
        let t = b2.state.unwrap();
        assert_eq!(t, Tripped { at_ms: 1_000, strikes: 1 });
        assert!(t.cooling(30_999, COOLDOWN_MS) && !t.cooling(31_000, COOLDOWN_MS));
        assert_eq!(Breaker::load(Some(d.clone()), "http://127.0.0.1:9999").state, None, "another bridge");
        // Timed out again after the cool-down: the next one is twice as long.
        let mut b3 = Breaker::load(Some(d.clone()), "http://127.0.0.1:8787");
        b3.trip(31_500, COOLDOWN_MS);
        assert_eq!(b3.state.unwrap().strikes, 2);
        assert_eq!(b3.state.unwrap().cooldown_ms(COOLDOWN_MS), 60_000);
        assert_eq!(Tripped { at_ms: 0, strikes: 40 }.cooldown_ms(COOLDOWN_MS), MAX_COOLDOWN_MS);
        // Long after, a timeout is a first strike again.
        let mut b4 = Breaker::load(Some(d.clone()), "http://127.0.0.1:8787");
        b4.trip(10_000_000, COOLDOWN_MS);
        assert_eq!(b4.state.unwrap().strikes, 1);
        b4.recover();
        assert_eq!(Breaker::load(Some(d.clone()), "http://127.0.0.1:8787").state, None);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_planted_symlink_or_a_shared_file_is_not_used() {
        let d = dir();
        let b = Breaker::load(Some(d.clone()), "u");
        let path = b.path.clone().unwrap();
        // A symlink in its place is neither read nor written through.
        let target = d.join("target");
        std::fs::write(&target, "1 1\n").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let mut b = Breaker::load(Some(d.clone()), "u");
        assert_eq!(b.state, None, "read through a symlink");
        b.trip(5, COOLDOWN_MS);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "1 1\n", "written through a symlink");
        std::fs::remove_file(&path).unwrap();
        // A file others may read or write is not the user's state.
        std::fs::write(&path, "1 1\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(Breaker::load(Some(d.clone()), "u").state, None);
        // Nor is a directory others may write.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Breaker::load(Some(d.clone()), "u").state.is_some());
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(Breaker::load(Some(d.clone()), "u").state, None);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_state_dir_is_the_override_else_the_runtime_dir_else_the_data_dir() {
        let p = |s: &str| Some(PathBuf::from(s));
        assert_eq!(state_dir(p("/x"), p("/run/user/1"), p("/home/u")), p("/x"));
        assert_eq!(state_dir(None, p("/run/user/1"), p("/home/u")), p("/run/user/1"));
        assert_eq!(state_dir(None, p("relative"), p("/home/u")), p("/home/u/.aep"));
        assert_eq!(state_dir(None, None, None), None);
    }
}
