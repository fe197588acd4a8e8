//! `mappings/vscode-otel.json` through this project's VS Code OTel profile
//! (`aep_adapters::otel::vscode`), in both modes; see [`super::codex_otel`] for the check shape.

use aep_adapters::otel::Vendor;

use crate::{Checks, Fixtures};

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    super::codex_otel::run_otel_pins(fx, out, "vscode-otel", Vendor::Vscode);
}
