//! One `serve` per data directory: an exclusive lock on `{data_dir}/serve.lock`.
//!
//! Two bridges on one directory would both bump the epoch and both append to the same
//! session logs, so hooks alternating between them write logs that fail validation (an
//! epoch reused, a run cancelled by the other bridge's idle rule). The lock is the
//! kernel's (`flock(2)`, non-blocking): it goes with the process,
//! however that ends, so a crash leaves no stale lock behind. The file keeps the holder's
//! pid for the refusal message only; it is never what decides.

use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

/// The lock file's name inside the data directory.
pub const LOCK_FILE: &str = "serve.lock";

/// Why the data directory could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the lock.
    #[error(
        "data directory {} is in use by another aep-bridge serve ({}): stop that one, or give this \
         one its own --data-dir (two bridges on one data directory corrupt its session logs)",
        .dir.display(),
        .pid.map_or_else(|| "its pid is not written yet".to_owned(), |p| format!("pid {p}"))
    )]
    Held {
        /// The data directory.
        dir: PathBuf,
        /// The holder's pid, as it wrote it.
        pid: Option<u32>,
    },
    /// The lock file cannot be opened.
    #[error("data directory {}: cannot open {LOCK_FILE}: {source}", .dir.display())]
    Io {
        /// The data directory.
        dir: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The held lock; released when dropped or when the process ends.
#[derive(Debug)]
pub struct DataDirLock {
    _file: std::fs::File,
}

impl DataDirLock {
    /// Takes `dir`'s lock (creating the directory), or says who holds it. A file system that
    /// has no locks (some network mounts) is warned about and not refused.
    pub fn acquire(dir: &Path) -> Result<Self, LockError> {
        let io = |source| LockError::Io { dir: dir.to_owned(), source };
        std::fs::create_dir_all(dir).map_err(io)?;
        let path = dir.join(LOCK_FILE);
        let mut file =
            std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
        match try_lock(&file) {
            Ok(true) => {}
            Ok(false) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(LockError::Held { dir: dir.to_owned(), pid: text.trim().parse().ok() });
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "The data directory cannot be locked here: make sure one serve uses it.");
            }
        }
        // The pid of a holder that crashed is replaced; a partial write is harmless (the
        // lock, not the text, decides).
        let _ = file.set_len(0).and_then(|()| file.rewind()).and_then(|()| writeln!(file, "{}", std::process::id()));
        Ok(Self { _file: file })
    }
}

/// `flock(LOCK_EX | LOCK_NB)`: `Ok(false)` when another open file holds it.
#[cfg(unix)]
fn try_lock(file: &std::fs::File) -> std::io::Result<bool> {
    use rustix::fs::{FlockOperation, flock};
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// No advisory lock here: said once, never refused.
#[cfg(not(unix))]
fn try_lock(_: &std::fs::File) -> std::io::Result<bool> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "no flock on this platform"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid_until_it_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        // flock locks belong to the open file: a second open in this process conflicts too.
        match DataDirLock::acquire(dir.path()) {
            Err(LockError::Held { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Held, got {other:?}"),
        }
        let msg = DataDirLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(msg.contains(&format!("pid {}", std::process::id())) && msg.contains("--data-dir"), "{msg}");
        drop(first);
        let _again = DataDirLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn a_left_over_file_with_a_dead_pid_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LOCK_FILE), "999999999\n").unwrap();
        let _held = DataDirLock::acquire(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert_eq!(text, format!("{}\n", std::process::id()));
    }
}
