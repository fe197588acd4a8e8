//! What `install` created that was not there before (folders, settings files, scripts, the
//! plugin SDK stand-ins), kept in the data directory as `installed.json`: `uninstall` removes
//! exactly those, and never a folder the user already had, which nothing on disk could tell
//! apart from one we made. Each path lists the installs that rely on it (an OpenCode project
//! install relies on the lock in the user's config folder too); a path goes when the last of
//! them is uninstalled.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file name in the data directory.
const FILE: &str = "installed.json";

/// The record.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Ledger {
    /// Created paths, each with the installs (`<vendor> <scope>`) that rely on it.
    #[serde(default)]
    pub created: BTreeMap<String, BTreeSet<String>>,
    /// The data directory itself was made to hold this record.
    #[serde(default)]
    pub data_dir_created: bool,
}

/// Why the record could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// Reading or writing failed.
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// The file is not a record.
    #[error("{0}: not an install record ({1})")]
    Parse(PathBuf, serde_json::Error),
}

impl Ledger {
    /// The record in `data_dir` (empty when there is none).
    pub fn load(data_dir: &Path) -> Result<Self, LedgerError> {
        let file = data_dir.join(FILE);
        match std::fs::read_to_string(&file) {
            Ok(t) => serde_json::from_str(&t).map_err(|e| LedgerError::Parse(file, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(LedgerError::Io(file, e)),
        }
    }

    /// Writes the record; an empty one removes the file, and the data directory when the
    /// record made it and nothing else has been put there since.
    pub fn save(&mut self, data_dir: &Path) -> Result<(), LedgerError> {
        let file = data_dir.join(FILE);
        if self.created.is_empty() {
            match std::fs::remove_file(&file) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(LedgerError::Io(file, e)),
            }
            if self.data_dir_created {
                // Fails, and keeps the folder, when the bridge has written logs there.
                let _ = std::fs::remove_dir(data_dir);
            }
            return Ok(());
        }
        if !data_dir.exists() {
            std::fs::create_dir_all(data_dir).map_err(|e| LedgerError::Io(data_dir.to_path_buf(), e))?;
            self.data_dir_created = true;
        }
        let mut text = serde_json::to_string_pretty(self).map_err(|e| LedgerError::Parse(file.clone(), e))?;
        text.push('\n');
        // A sibling renamed over it: a crash never leaves half a record.
        let tmp = data_dir.join(format!("{FILE}.tmp"));
        std::fs::write(&tmp, text).map_err(|e| LedgerError::Io(tmp.clone(), e))?;
        std::fs::rename(&tmp, &file).map_err(|e| LedgerError::Io(file, e))
    }

    /// Records that `owner` created `created` and relies on `used`: it becomes an owner of
    /// each created path, and of each recorded path that is one of `used` or holds one.
    pub fn claim(&mut self, owner: &str, created: &[PathBuf], used: &[PathBuf]) {
        for p in created {
            self.created.entry(key(p)).or_default().insert(owner.to_owned());
        }
        for (p, owners) in &mut self.created {
            if used.iter().any(|u| u.starts_with(p)) {
                owners.insert(owner.to_owned());
            }
        }
    }

    /// Drops `owner` everywhere; returns the paths no install relies on any more (taken out
    /// of the record), deepest first, for the caller to remove.
    pub fn release(&mut self, owner: &str) -> Vec<PathBuf> {
        let mut free = Vec::new();
        self.created.retain(|p, owners| {
            owners.remove(owner);
            if owners.is_empty() {
                free.push(PathBuf::from(p));
            }
            !owners.is_empty()
        });
        // A path sorts before whatever it holds: reversed, the contents come first.
        free.sort();
        free.reverse();
        free
    }
}

fn key(p: &Path) -> String {
    p.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_goes_with_its_last_owner_and_contents_come_first() {
        let mut l = Ledger::default();
        let dir = PathBuf::from("/h/.config/opencode");
        let lock = dir.join("package-lock.json");
        l.claim("opencode project:/a", &[dir.clone(), lock.clone()], std::slice::from_ref(&lock));
        l.claim("opencode project:/b", &[], std::slice::from_ref(&lock));
        assert!(l.release("opencode project:/a").is_empty());
        assert_eq!(l.release("opencode project:/b"), vec![lock, dir]);
        assert!(l.created.is_empty());
    }

    #[test]
    fn an_empty_record_removes_its_file_and_the_folder_it_made() {
        let home = tempfile::tempdir().unwrap();
        let data = home.path().join(".aep");
        let mut l = Ledger::default();
        l.claim("pi user", &[home.path().join(".pi")], &[]);
        l.save(&data).unwrap();
        assert!(l.data_dir_created);
        let mut back = Ledger::load(&data).unwrap();
        assert_eq!(back, l);
        back.release("pi user");
        back.save(&data).unwrap();
        assert!(!data.exists());
    }
}
