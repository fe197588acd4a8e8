//! The `aep-conformance-report` shape, shared with the spec's own runners (conformance README).

use serde::Serialize;

/// A check's outcome. The fixture runners never emit `skip`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The check held.
    Pass,
    /// The check did not hold; `detail` says why.
    Fail,
    /// The check was not run; `detail` says why.
    Skip,
}

/// One named check.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Starts with the fixture class, e.g. `golden[3] tool.completed`.
    pub name: String,
    /// Outcome.
    pub status: Status,
    /// Human text for a failure or skip; omitted when there is nothing to say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Totals of a report.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Passed checks.
    pub pass: usize,
    /// Failed checks.
    pub fail: usize,
    /// Skipped checks.
    pub skip: usize,
    /// Always `checks.len()`.
    pub total: usize,
}

/// The machine-readable report (`format: aep-conformance-report`, `formatVersion: 1`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Always `aep-conformance-report`.
    pub format: &'static str,
    /// Always 1.
    pub format_version: u32,
    /// The AEP version checked.
    pub aep: &'static str,
    /// The tool name.
    pub tool: &'static str,
    /// `null` for fixture runners.
    pub target: Option<String>,
    /// ISO 8601 start time.
    pub started_at: String,
    /// ISO 8601 finish time.
    pub finished_at: String,
    /// The checks in run order.
    pub checks: Vec<Check>,
    /// Totals.
    pub summary: Summary,
    /// `true` exactly when `summary.fail` is zero.
    pub ok: bool,
}

impl Report {
    /// Builds a report from checks; the caller supplies the timestamps (this crate reads no clock).
    pub fn new(tool: &'static str, checks: Vec<Check>, started_at: String, finished_at: String) -> Self {
        let count = |s| checks.iter().filter(|c| c.status == s).count();
        let summary = Summary {
            pass: count(Status::Pass),
            fail: count(Status::Fail),
            skip: count(Status::Skip),
            total: checks.len(),
        };
        Report {
            format: "aep-conformance-report",
            format_version: 1,
            aep: aep_schemas::AEP_VERSION,
            tool,
            target: None,
            started_at,
            finished_at,
            ok: summary.fail == 0,
            checks,
            summary,
        }
    }

    /// Pretty JSON with a trailing newline, as the README's `--json -` mode prints it.
    pub fn to_pretty_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}
