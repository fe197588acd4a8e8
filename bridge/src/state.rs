//! Durable epoch memory (AEP-0001 §7 rule 2): every start of the bridge uses an epoch
//! strictly greater than any earlier start, kept in `{data_dir}/state/epoch`.

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
    let tmp = dir.join("epoch.tmp");
    let written = (|| {
        let mut f = fs::File::create(&tmp)?;
        writeln!(f, "{next}")?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, path)?;
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Overwrites the state file in place with `next`, padded so it covers any earlier value.
fn overwrite(path: &Path, next: u64) -> std::io::Result<()> {
    let mut f = fs::OpenOptions::new().write(true).open(path)?;
    writeln!(f, "{next:<20}")?;
    f.sync_all()
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
}
