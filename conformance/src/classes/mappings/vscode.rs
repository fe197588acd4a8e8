//! `mappings/vscode.json` through this project's VS Code agent hook adapter: one check per hook
//! entry plus the fallback, at the default posture the file pins.

use aep_adapters::vendors::vscode;

use crate::{Checks, Fixtures};

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let adapter = vscode::adapter();
    super::codex::run_hook_table(fx, out, "vscode", &|input| super::codex::through(adapter.as_ref(), input));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore = "needs the spec checkout at /work/shared/aep-spec"]
    fn against_the_spec_fixtures() {
        let mut out = Checks::default();
        run(&Fixtures::new("/work/shared/aep-spec"), &mut out);
        let failed: Vec<_> = out.into_vec().into_iter().filter(|c| c.detail.is_some()).collect();
        assert!(failed.is_empty(), "{failed:#?}");
    }
}
