//! The drift counter: hook events, hook payload fields and OTel event names an agent sent
//! that its adapter was not written for, counted per vendor, agent version and kind
//! (`aep.bridge.drift`, rendered `aep_bridge_drift_total{vendor,version,kind}` at `/metrics`)
//! and logged once per vendor, version and name. Which names are known is the adapter's
//! knowledge (`aep_adapters::drift`); this only counts.
//!
//! The version is the one the payload names when its vocabulary says where, else the last
//! `service.version` the vendor's own OTLP export named, else `unknown`. Labels are bounded:
//! versions are cut to 64 characters, at most [`MAX_VERSIONS`] versions are remembered, and
//! the names logged are capped at [`MAX_LOGGED`] (then one line says the rest are counted only).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use aep_adapters::drift::Drift;

use crate::metrics::CounterVec;

/// Most vendors whose last OTLP version is remembered.
const MAX_VERSIONS: usize = 64;
/// Most distinct names logged per process.
const MAX_LOGGED: usize = 1024;

/// Counts and logs drift.
#[derive(Debug)]
pub struct DriftCounter {
    counter: CounterVec,
    versions: Mutex<HashMap<String, String>>,
    logged: Mutex<HashSet<(String, String, String)>>,
}

impl DriftCounter {
    /// A counter over `counter` (the `aep.bridge.drift` instrument).
    pub fn new(counter: CounterVec) -> Self {
        Self { counter, versions: Mutex::new(HashMap::new()), logged: Mutex::new(HashSet::new()) }
    }

    /// Remembers the agent version `vendor`'s OTLP export names (its resource's `service.version`).
    pub fn version_seen(&self, vendor: &str, version: &str) {
        let Ok(mut v) = self.versions.lock() else { return };
        if v.get(vendor).is_some_and(|old| old == version) {
            return;
        }
        if v.len() < MAX_VERSIONS || v.contains_key(vendor) {
            v.insert(vendor.to_owned(), version.chars().take(64).collect());
        }
    }

    /// The version to count `vendor`'s drift under: `given`, else the last one its OTLP named.
    fn version(&self, vendor: &str, given: Option<&str>) -> String {
        match given {
            Some(v) => v.chars().take(64).collect(),
            None => self.versions.lock().ok().and_then(|v| v.get(vendor).cloned()).unwrap_or_else(|| "unknown".into()),
        }
    }

    /// Counts `drift` of `vendor` (at `version` when the caller knows it) and logs each name
    /// the first time it is seen for that vendor and version.
    pub fn count(&self, vendor: &str, version: Option<&str>, drift: &[Drift]) {
        if drift.is_empty() {
            return;
        }
        let version = self.version(vendor, version);
        for d in drift {
            let kind = d.kind.as_str();
            self.counter.inc(&[("vendor", vendor), ("version", &version), ("kind", kind)]);
            let Ok(mut logged) = self.logged.lock() else { continue };
            let key = (vendor.to_owned(), version.clone(), format!("{kind}:{}", d.name));
            if logged.contains(&key) {
                continue;
            }
            if logged.len() == MAX_LOGGED {
                tracing::warn!("More drift names than {MAX_LOGGED}: further ones are counted, not logged.");
            }
            if logged.len() <= MAX_LOGGED {
                tracing::warn!(vendor, version, kind, name = %d.name,
                    "Drift: the agent sent what its adapter does not know (counted in aep_bridge_drift_total).");
                logged.insert(key);
            }
        }
    }

    /// The count of one series (tests, doctor).
    pub fn get(&self, vendor: &str, version: &str, kind: &str) -> u64 {
        self.counter.get(&[("vendor", vendor), ("version", version), ("kind", kind)])
    }
}

#[cfg(test)]
mod tests {
    use aep_adapters::drift::DriftKind;

    use super::*;
    use crate::metrics::Metrics;

    #[test]
    fn counts_per_vendor_version_and_kind_with_the_otlp_version_as_fallback() {
        let m = Metrics::new();
        let d = &m.drift;
        let field = |n: &str| Drift { kind: DriftKind::HookField, name: n.into() };
        d.count("v", None, &[field("A.x"), field("A.y")]);
        assert_eq!(d.get("v", "unknown", "hook_field"), 2);
        d.version_seen("v", "1.2.3");
        d.count("v", None, &[field("A.x")]);
        d.count("v", Some("9"), &[Drift { kind: DriftKind::HookEvent, name: "New".into() }]);
        assert_eq!(d.get("v", "1.2.3", "hook_field"), 1);
        assert_eq!(d.get("v", "9", "hook_event"), 1);
        assert!(m.render().contains("aep_bridge_drift_total{kind=\"hook_event\",vendor=\"v\",version=\"9\"} 1"));
    }
}
