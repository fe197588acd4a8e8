//! The whole runner against a spec checkout, held to the ratchet (`required-checks.txt`).
//!
//! Ignored by default: it needs the spec corpus, which is not part of this repository.
//! `AEP_SPEC=/path/to/aep-spec cargo test -p aep-conformance --test spec -- --ignored`
//! (default: `shared/aep-spec` beside the workspace folder). Skips with a message when
//! the checkout is absent.

use std::path::{Path, PathBuf};

use aep_conformance::{Status, cli, run_all};

/// The spec checkout: `AEP_SPEC`, else `../shared/aep-spec` from the workspace root.
fn spec_dir() -> PathBuf {
    std::env::var_os("AEP_SPEC")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/aep-spec")))
}

#[test]
#[ignore = "needs the spec checkout (AEP_SPEC, default ../shared/aep-spec beside the workspace)"]
fn required_checks_pass_against_the_spec() {
    let spec = spec_dir();
    if !spec.join("conformance/fixtures").is_dir() {
        eprintln!("skipped: no spec checkout at {} (set AEP_SPEC)", spec.display());
        return;
    }
    let checks = run_all(&spec);
    let required = cli::read_required(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/required-checks.txt")))
        .expect("conformance/required-checks.txt is readable");
    let failing: Vec<String> = required
        .iter()
        .filter_map(|name| match checks.iter().find(|c| &c.name == name) {
            Some(c) if c.status == Status::Pass => None,
            Some(c) => Some(format!("{name}: {}", c.detail.as_deref().unwrap_or("failed"))),
            None => Some(format!("{name}: not run")),
        })
        .collect();
    let passed = checks.iter().filter(|c| c.status == Status::Pass).count();
    eprintln!(
        "{passed} of {} checks pass; {} of {} required",
        checks.len(),
        required.len() - failing.len(),
        required.len()
    );
    assert!(failing.is_empty(), "required checks failing:\n{}", failing.join("\n"));
}
