//! What `/healthz` reports beyond liveness: sinks that are failing right now (a full disk
//! under the JSONL log, an unwritable state file), each with its last error.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Failing components by name, with their last error; empty when all is well.
#[derive(Debug, Default)]
pub struct Health {
    failing: Mutex<BTreeMap<&'static str, String>>,
}

impl Health {
    /// Marks `part` as failing with `error` (the latest error replaces an earlier one).
    pub fn failing(&self, part: &'static str, error: impl std::fmt::Display) {
        let mut m = self.failing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        m.insert(part, error.to_string());
    }

    /// Marks `part` as working again.
    pub fn recovered(&self, part: &'static str) {
        let mut m = self.failing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        m.remove(part);
    }

    /// The failing parts and their errors, by name.
    pub fn failures(&self) -> BTreeMap<&'static str, String> {
        self.failing.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}
