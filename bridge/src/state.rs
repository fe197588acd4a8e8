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
pub fn bump_epoch(data_dir: &Path, now_unix_secs: u64) -> Result<u64, StateError> {
    let dir = data_dir.join("state");
    let path = dir.join("epoch");
    let err = |source| StateError { path: path.display().to_string(), source };
    fs::create_dir_all(&dir).map_err(err)?;
    let next = match fs::read_to_string(&path) {
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(last) => last.saturating_add(1),
            Err(_) => now_unix_secs,
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(err(e)),
    };
    let tmp = dir.join("epoch.tmp");
    {
        let mut f = fs::File::create(&tmp).map_err(err)?;
        writeln!(f, "{next}").map_err(err)?;
        f.sync_all().map_err(err)?;
    }
    fs::rename(&tmp, &path).map_err(err)?;
    if let Ok(d) = fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_start_bumps_the_epoch() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(bump_epoch(dir.path(), 100).unwrap(), 0);
        assert_eq!(bump_epoch(dir.path(), 100).unwrap(), 1);
        assert_eq!(bump_epoch(dir.path(), 100).unwrap(), 2);
        fs::write(dir.path().join("state/epoch"), "garbage").unwrap();
        assert_eq!(bump_epoch(dir.path(), 1_800_000_000).unwrap(), 1_800_000_000);
        assert_eq!(bump_epoch(dir.path(), 5).unwrap(), 1_800_000_001);
    }
}
