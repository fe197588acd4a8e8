//! The process environment, read in one place.
//!
//! Every variable the daemon library looks at goes through an [`Env`]: `serve` and the CLI
//! use [`Env::process`], tests a fixed map ([`Env::from_pairs`]), so no test has to touch the
//! real environment. The `OTEL_EXPORTER_OTLP_*` rules live in [`crate::export::otel_env`],
//! which reads through the same lookup.

use std::path::PathBuf;
use std::sync::Arc;

/// `HOME`: the default data directory's parent and the redacted home prefix.
pub const HOME: &str = "HOME";
/// `AEP_BRIDGE_DATA_DIR`: the data directory (`--data-dir`'s environment twin).
pub const AEP_BRIDGE_DATA_DIR: &str = "AEP_BRIDGE_DATA_DIR";
/// `AEP_TOKEN`: the bearer token the shim, `tail`, `respond` and `serve` share.
pub const AEP_TOKEN: &str = "AEP_TOKEN";
/// `AEP_HOST`: the host part of a CLI sender's `source` URI.
pub const AEP_HOST: &str = "AEP_HOST";
/// `NO_COLOR`: set (to anything) turns terminal colours off (<https://no-color.org>).
pub const NO_COLOR: &str = "NO_COLOR";

type Lookup = dyn Fn(&str) -> Option<String> + Send + Sync;

/// A read-only view of environment variables.
#[derive(Clone)]
pub struct Env {
    lookup: Arc<Lookup>,
}

impl Env {
    /// The process environment (variables that are not valid UTF-8 read as unset).
    pub fn process() -> Self {
        Self::from_fn(|k| std::env::var(k).ok())
    }

    /// An environment answered by `lookup`.
    pub fn from_fn(lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        Self { lookup: Arc::new(lookup) }
    }

    /// A fixed environment of `pairs` (tests).
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        let map: std::collections::HashMap<String, String> =
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        Self::from_fn(move |k| map.get(k).cloned())
    }

    /// The raw value of `name`, set or not (an empty value is returned as is).
    pub fn raw(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
    }

    /// The value of `name` when it is set and not blank.
    pub fn var(&self, name: &str) -> Option<String> {
        self.raw(name).filter(|v| !v.trim().is_empty())
    }

    /// Whether `name` is set at all (`NO_COLOR` counts when empty too).
    pub fn is_set(&self, name: &str) -> bool {
        self.raw(name).is_some()
    }

    /// `$HOME`.
    pub fn home(&self) -> Option<PathBuf> {
        self.var(HOME).map(PathBuf::from)
    }

    /// The default data directory: `$AEP_BRIDGE_DATA_DIR`, else `~/.aep`, else `./.aep`.
    pub fn data_dir(&self) -> PathBuf {
        self.var(AEP_BRIDGE_DATA_DIR)
            .map(PathBuf::from)
            .or_else(|| self.home().map(|h| h.join(".aep")))
            .unwrap_or_else(|| PathBuf::from(".aep"))
    }
}

impl Default for Env {
    /// The process environment.
    fn default() -> Self {
        Self::process()
    }
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Values may be secrets (the redaction list reads named variables): never printed.
        f.write_str("Env(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_dir_prefers_the_variable_then_home() {
        let e = Env::from_pairs(&[(HOME, "/home/u"), (AEP_BRIDGE_DATA_DIR, "/srv/aep")]);
        assert_eq!(e.data_dir(), PathBuf::from("/srv/aep"));
        let e = Env::from_pairs(&[(HOME, "/home/u"), (AEP_BRIDGE_DATA_DIR, " ")]);
        assert_eq!(e.data_dir(), PathBuf::from("/home/u/.aep"), "a blank value is unset");
        assert_eq!(Env::from_pairs(&[]).data_dir(), PathBuf::from(".aep"));
    }

    #[test]
    fn an_empty_value_is_set_but_not_a_value() {
        let e = Env::from_pairs(&[(NO_COLOR, "")]);
        assert!(e.is_set(NO_COLOR) && e.var(NO_COLOR).is_none());
        assert_eq!(format!("{e:?}"), "Env(..)");
    }
}
