//! The conformance runner: runs every fixture class of the AEP spec corpus
//! (`conformance/fixtures/` under a spec checkout) against this project's
//! implementations and writes the `aep-conformance-report` (conformance README,
//! "The report format").
//!
//! Each class lives in [`classes`]; each fixture case becomes one check whose name
//! starts with its class, so a report names exactly the case that fails.

pub mod classes;
pub mod cli;
pub mod report;

use std::path::{Path, PathBuf};

pub use report::{Check, Report, Status};

/// Reads fixture files below `{spec}/conformance/fixtures/` (and the schemas beside them).
#[derive(Debug, Clone)]
pub struct Fixtures {
    spec: PathBuf,
}

impl Fixtures {
    /// Fixtures of the spec checkout at `spec` (the folder holding `spec/`, `schemas/`, `conformance/`).
    pub fn new(spec: impl Into<PathBuf>) -> Self {
        Self { spec: spec.into() }
    }

    /// The spec checkout root.
    pub fn root(&self) -> &Path {
        &self.spec
    }

    /// Path of a fixture file, relative to `conformance/fixtures/`.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.spec.join("conformance/fixtures").join(rel)
    }

    /// Reads and parses a JSON fixture file.
    pub fn json(&self, rel: &str) -> Result<serde_json::Value, String> {
        let path = self.path(rel);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))
    }

    /// Reads a JSONL fixture file as one JSON value per non-empty line.
    pub fn jsonl(&self, rel: &str) -> Result<Vec<serde_json::Value>, String> {
        let path = self.path(rel);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("{} line {}: {e}", path.display(), i + 1)))
            .collect()
    }
}

/// Collects checks as the classes run.
#[derive(Debug, Default)]
pub struct Checks {
    checks: Vec<Check>,
}

impl Checks {
    /// Records a check from a result: `Ok` passes, `Err(detail)` fails.
    pub fn record(&mut self, name: impl Into<String>, result: Result<(), String>) {
        let (status, detail) = match result {
            Ok(()) => (Status::Pass, None),
            Err(d) => (Status::Fail, Some(d)),
        };
        self.checks.push(Check { name: name.into(), status, detail });
    }

    /// Records a failing check.
    pub fn fail(&mut self, name: impl Into<String>, detail: impl Into<String>) {
        self.record(name, Err(detail.into()));
    }

    /// The checks recorded so far.
    pub fn into_vec(self) -> Vec<Check> {
        self.checks
    }
}

/// Runs every class against the spec at `spec` and returns the checks in order.
pub fn run_all(spec: &Path) -> Vec<Check> {
    let fx = Fixtures::new(spec);
    let mut out = Checks::default();
    for class in classes::ALL {
        (class.run)(&fx, &mut out);
    }
    out.into_vec()
}

/// Compares two JSON values and describes the first difference, for readable failures.
pub fn diff(expected: &serde_json::Value, actual: &serde_json::Value) -> Result<(), String> {
    fn walk(path: &str, e: &serde_json::Value, a: &serde_json::Value) -> Option<String> {
        use serde_json::Value as V;
        match (e, a) {
            (V::Object(em), V::Object(am)) => {
                for (k, ev) in em {
                    match am.get(k) {
                        None => return Some(format!("{path}.{k}: missing (expected {ev})")),
                        Some(av) => {
                            if let Some(d) = walk(&format!("{path}.{k}"), ev, av) {
                                return Some(d);
                            }
                        }
                    }
                }
                am.keys()
                    .find(|k| !em.contains_key(*k))
                    .map(|k| format!("{path}.{k}: unexpected (got {})", am[k.as_str()]))
            }
            (V::Array(ea), V::Array(aa)) => {
                if ea.len() != aa.len() {
                    return Some(format!("{path}: expected {} items, got {}", ea.len(), aa.len()));
                }
                ea.iter().zip(aa).enumerate().find_map(|(i, (e, a))| walk(&format!("{path}[{i}]"), e, a))
            }
            (V::Number(en), V::Number(an)) if en.as_f64() == an.as_f64() => None,
            _ if e == a => None,
            _ => Some(format!("{path}: expected {e}, got {a}")),
        }
    }
    match walk("$", expected, actual) {
        None => Ok(()),
        Some(d) => Err(d),
    }
}
