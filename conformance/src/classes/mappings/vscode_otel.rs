//! `mappings/vscode-otel.json` through this project's adapter (in progress).

use crate::{Checks, Fixtures};

/// Appends this file's checks.
pub fn run(_fx: &Fixtures, out: &mut Checks) {
    super::not_implemented(out, "vscode-otel");
}
