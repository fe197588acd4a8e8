//! The runner's command line of `aep-conformance`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::{Report, Status};

/// Options of one run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The spec checkout (holding `conformance/fixtures/`).
    pub spec: PathBuf,
    /// Where to write the JSON report (`-` = stdout, human lines then go to stderr).
    pub json: Option<String>,
    /// A ratchet file: one check name per line (`#` comments); every listed check must pass.
    pub required: Option<PathBuf>,
    /// Only run checks whose name starts with one of these prefixes.
    pub only: Vec<String>,
}

fn iso_now() -> String {
    let ms = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    aep_schemas::time::format_rfc3339_ms(ms)
}

/// Reads a ratchet file: check names, one per line, `#` comments and blanks ignored.
pub fn read_required(path: &Path) -> std::io::Result<Vec<String>> {
    Ok(std::fs::read_to_string(path)?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect())
}

/// Runs the corpus, prints one line per check, writes the report; returns the exit code
/// (0 when every check passed, or, with `required`, when every required check passed).
pub fn run(opts: &RunOptions) -> i32 {
    let started = iso_now();
    if !opts.spec.join("conformance/fixtures").is_dir() {
        eprintln!("aep-conformance: {} has no conformance/fixtures folder", opts.spec.display());
        return 2;
    }
    let mut checks = crate::run_all(&opts.spec);
    if !opts.only.is_empty() {
        checks.retain(|c| opts.only.iter().any(|p| c.name.starts_with(p.as_str())));
    }
    let report = Report::new("aep-bridge", checks, started, iso_now());
    let to_stdout = opts.json.as_deref() == Some("-");
    let mut human: Box<dyn std::io::Write> =
        if to_stdout { Box::new(std::io::stderr()) } else { Box::new(std::io::stdout()) };
    let _ = writeln!(human, "aep-conformance: {}", opts.spec.display());
    for c in &report.checks {
        let mark = match c.status {
            Status::Pass => "pass",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        };
        match &c.detail {
            Some(d) => {
                let _ = writeln!(human, "{mark} {}: {d}", c.name);
            }
            None => {
                let _ = writeln!(human, "{mark} {}", c.name);
            }
        }
    }
    let s = &report.summary;
    let _ = writeln!(human, "{} passed, {} failed, {} skipped ({} checks)", s.pass, s.fail, s.skip, s.total);
    match opts.json.as_deref() {
        Some("-") => print!("{}", report.to_pretty_json()),
        Some(path) => {
            if let Err(e) = std::fs::write(path, report.to_pretty_json()) {
                eprintln!("aep-conformance: cannot write {path}: {e}");
                return 2;
            }
        }
        None => {}
    }
    let Some(req) = &opts.required else { return i32::from(!report.ok) };
    let required = match read_required(req) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("aep-conformance: cannot read {}: {e}", req.display());
            return 2;
        }
    };
    let mut bad = Vec::new();
    for name in &required {
        match report.checks.iter().find(|c| &c.name == name) {
            Some(c) if c.status == Status::Pass => {}
            Some(c) => bad.push(format!("{name} ({})", c.detail.as_deref().unwrap_or("failed"))),
            None => bad.push(format!("{name} (not run)")),
        }
    }
    let _ = writeln!(human, "required: {} of {} pass", required.len() - bad.len(), required.len());
    for b in &bad {
        let _ = writeln!(human, "REQUIRED CHECK FAILED: {b}");
    }
    i32::from(!bad.is_empty())
}
