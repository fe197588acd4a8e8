//! Durable state under `{data_dir}/state`: the epoch memory (AEP-0001 §7 rule 2: every
//! start of the bridge uses an epoch strictly greater than any earlier start, kept in
//! `state/epoch`) and the observers' cursors ([`Cursors`]: what a restarted bridge resumes
//! each observed conversation after, `state/{vendor}/{bridge}/{key}.json`).

use std::fs;
use std::io::Write as _;
use std::path::Path;

/// Error reading or writing the epoch state file.
#[derive(Debug, thiserror::Error)]
#[error("epoch state file {path}: {source}")]
pub struct StateError {
    /// The file.
    pub path: String,
    /// The I/O error.
    #[source]
    pub source: std::io::Error,
}

/// Reads the last epoch, bumps it, persists the new value durably (write to a temporary
/// file, fsync, rename, fsync the folder) and returns it. The first start uses epoch 0.
///
/// A state file that cannot be parsed is not trusted: the new epoch is then seeded from
/// the startup time in seconds, which is monotonic across restarts (AEP-0001 §7 rule 2
/// names a startup timestamp as a legal seed), and is at least one above what the file
/// held if anything could be read.
///
/// A full disk does not stop a start: when no new file can be written the existing one is
/// overwritten in place, and when even that fails the epoch is seeded from the clock and
/// [`Epoch::not_durable`] says why.
pub fn bump_epoch(data_dir: &Path, now_unix_secs: u64) -> Result<Epoch, StateError> {
    let dir = data_dir.join("state");
    let path = dir.join("epoch");
    let err = |source| StateError { path: path.display().to_string(), source };
    fs::create_dir_all(&dir).map_err(err)?;
    let (next, existed) = match fs::read_to_string(&path) {
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(last) => (last.saturating_add(1), true),
            Err(_) => (now_unix_secs, true),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (0, false),
        Err(e) => return Err(err(e)),
    };
    let Err(replace_error) = replace(&dir, &path, next) else {
        return Ok(Epoch { value: next, not_durable: None });
    };
    // A full disk cannot take a new file, but the existing one already owns its block:
    // overwrite it in place (a number padded to a fixed width; one short write).
    if existed && overwrite(&path, next).is_ok() {
        return Ok(Epoch { value: next, not_durable: None });
    }
    // Nothing could be written: seed from the startup time, which is monotonic across
    // restarts (AEP-0001 §7 rule 2), and say so.
    let value = next.max(now_unix_secs);
    Ok(Epoch {
        value,
        not_durable: Some(format!(
            "epoch {value} could not be written to {}: {replace_error}; it is seeded from the clock",
            path.display()
        )),
    })
}

/// A new epoch; `not_durable` says why it could not be written down, when it could not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Epoch {
    /// The epoch of this start.
    pub value: u64,
    /// Why the value is not in the state file, when it is not.
    pub not_durable: Option<String>,
}

/// Writes `next` to a temporary file, fsyncs, renames it over `path`, fsyncs the folder.
fn replace(dir: &Path, path: &Path, next: u64) -> std::io::Result<()> {
    replace_with(dir, &dir.join("epoch.tmp"), path, format!("{next}\n").as_bytes())
}

/// Overwrites the state file in place with `next`, padded so it covers any earlier value.
fn overwrite(path: &Path, next: u64) -> std::io::Result<()> {
    let mut f = fs::OpenOptions::new().write(true).open(path)?;
    writeln!(f, "{next:<20}")?;
    f.sync_all()
}

/// One bridge's cursors, `{state}/{vendor}/{bridge}/{key}.json`, each written atomically
/// (a temporary file, fsynced, renamed over the old one). Keys are the observer's (a
/// conversation id); one that is not a plain token is never a file name.
#[derive(Debug, Clone)]
pub struct Cursors {
    dir: std::path::PathBuf,
}

impl Cursors {
    /// The cursors of bridge `bridge` observing `vendor`, under the state folder `state`.
    pub fn new(state: &Path, vendor: &str, bridge: &str) -> Self {
        let safe = |s: &str| -> String {
            s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
        };
        Self { dir: state.join(safe(vendor)).join(safe(bridge)) }
    }

    fn path(&self, key: &str) -> Option<std::path::PathBuf> {
        let ok = !key.is_empty()
            && key.len() <= 128
            && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        ok.then(|| self.dir.join(format!("{key}.json")))
    }

    /// The cursor of `key`, if one is stored; an unreadable one is reported and not trusted.
    pub fn load(&self, key: &str, bridge: &str) -> Option<serde_json::Value> {
        let path = self.path(key)?;
        let text = match fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(bridge, key, path = %path.display(), error = %e, "A cursor is unreadable; not resumed from.");
                return None;
            }
        };
        serde_json::from_slice(&text)
            .map_err(|e| tracing::warn!(bridge, key, path = %path.display(), error = %e, "A cursor is not JSON; not resumed from."))
            .ok()
    }

    /// Stores `value` as the cursor of `key`; a failure is logged (a restart would then
    /// map again what the cursor covers).
    pub fn save(&self, key: &str, value: &serde_json::Value, bridge: &str) {
        let Some(path) = self.path(key) else { return };
        let written = fs::create_dir_all(&self.dir).and_then(|()| {
            replace_with(&self.dir, &path.with_extension("json.tmp"), &path, value.to_string().as_bytes())
        });
        if let Err(e) = written {
            tracing::warn!(bridge, key, path = %path.display(), error = %e,
                "A cursor could not be written; a restart would map what it covers again.");
        }
    }

    /// Removes the cursor of `key` (nothing will resume after it).
    pub fn forget(&self, key: &str, bridge: &str) {
        let Some(path) = self.path(key) else { return };
        match fs::remove_file(&path) {
            Ok(()) => tracing::info!(bridge, key, "A cursor was removed."),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(bridge, key, path = %path.display(), error = %e, "A cursor could not be removed."),
        }
    }

    /// Removes the cursors nothing wrote for `ttl` whose key is not in `keep` (and the
    /// temporary files a crash left), returning the keys removed. A kept key's cursor stays
    /// however old: without it what it covers would be mapped again.
    pub fn expire(&self, keep: &[String], ttl: std::time::Duration, bridge: &str) -> Vec<String> {
        let Ok(entries) = fs::read_dir(&self.dir) else { return Vec::new() };
        let now = std::time::SystemTime::now();
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            // `{key}.json` and a `{key}.json.tmp` a crash left
            let Some((key, _)) = name.split_once(".json") else { continue };
            if self.path(key).is_none() || keep.iter().any(|k| k == key) {
                continue;
            }
            let age = entry.metadata().and_then(|m| m.modified()).ok().and_then(|t| now.duration_since(t).ok());
            if age.is_some_and(|a| a >= ttl) {
                match fs::remove_file(entry.path()) {
                    Ok(()) => {
                        tracing::info!(
                            bridge,
                            key,
                            "The cursor of something the server no longer lists expired; removed."
                        );
                        out.push(key.to_owned());
                    }
                    Err(e) => tracing::warn!(bridge, key, error = %e, "An expired cursor could not be removed."),
                }
            }
        }
        out
    }
}

/// Writes `bytes` to `tmp`, fsyncs, renames it over `path`, fsyncs the folder `dir`.
fn replace_with(dir: &Path, tmp: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let written = (|| {
        let mut f = fs::File::create(tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(tmp);
        return Err(e);
    }
    fs::rename(tmp, path)?;
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_start_bumps_the_epoch() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(bump_epoch(dir.path(), 100).unwrap().value, 0);
        assert_eq!(bump_epoch(dir.path(), 100).unwrap().value, 1);
        assert_eq!(bump_epoch(dir.path(), 100).unwrap().value, 2);
        fs::write(dir.path().join("state/epoch"), "garbage").unwrap();
        assert_eq!(bump_epoch(dir.path(), 1_800_000_000).unwrap().value, 1_800_000_000);
        assert_eq!(bump_epoch(dir.path(), 5).unwrap().value, 1_800_000_001);
    }

    /// With no room for a new file (here: the temporary name is taken by a folder) the
    /// existing file is overwritten in place; with no file at all the clock seeds it.
    #[test]
    fn an_unwritable_state_folder_does_not_stop_a_start() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(bump_epoch(dir.path(), 100).unwrap().value, 0);
        fs::create_dir(dir.path().join("state/epoch.tmp")).unwrap();
        assert_eq!(bump_epoch(dir.path(), 100).unwrap(), Epoch { value: 1, not_durable: None });
        assert_eq!(bump_epoch(dir.path(), 100).unwrap().value, 2, "the in-place value was read back");
        fs::remove_file(dir.path().join("state/epoch")).unwrap();
        let e = bump_epoch(dir.path(), 1_800_000_000).unwrap();
        assert_eq!(e.value, 1_800_000_000);
        assert!(e.not_durable.is_some_and(|m| m.contains("seeded from the clock")));
    }

    #[test]
    fn only_the_untouched_cursors_of_unlisted_keys_expire() {
        let dir = tempfile::tempdir().unwrap();
        let c = Cursors::new(dir.path(), "vendor", "b/1");
        c.save("listed", &serde_json::json!({"n": 1}), "b");
        assert_eq!(c.load("listed", "b"), Some(serde_json::json!({"n": 1})));
        assert_eq!((c.load("../x", "b"), c.load("missing", "b")), (None, None));
        let folder = dir.path().join("vendor/b_1");
        let now = std::time::SystemTime::now();
        let day = std::time::Duration::from_secs(86_400);
        for (name, age) in
            [("old.json", 40), ("listed.json", 40), ("fresh.json", 1), ("crashed.json.tmp", 40), ("notes.txt", 40)]
        {
            let f = fs::OpenOptions::new().create(true).append(true).open(folder.join(name)).unwrap();
            f.set_modified(now - day * age).unwrap();
        }
        let mut gone = c.expire(&["listed".to_owned()], day * 30, "b");
        gone.sort();
        assert_eq!(gone, ["crashed", "old"]);
        let mut left: Vec<String> =
            fs::read_dir(&folder).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["fresh.json", "listed.json", "notes.txt"]);
        c.forget("listed", "b");
        assert_eq!(c.load("listed", "b"), None);
        assert!(Cursors::new(dir.path(), "none", "b").expire(&[], day, "b").is_empty());
    }
}
