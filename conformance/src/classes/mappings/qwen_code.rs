//! `mappings/qwen-code.json` through this project's Qwen Code hook adapter: one check per hook
//! entry plus the fallback, at the default posture the file pins.

use aep_adapters::vendors::qwen_code;

use crate::{Checks, Fixtures};

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let adapter = qwen_code::adapter();
    super::codex::run_hook_table(fx, out, "qwen-code", &|input| super::codex::through(adapter.as_ref(), input));
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
