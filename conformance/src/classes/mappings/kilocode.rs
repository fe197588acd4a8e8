//! `mappings/kilocode.json` through this project's Kilo Code adapter (the OpenCode plugin
//! adapter on Kilo's profile); same check layout and preludes as `mappings/opencode`.

use crate::{Checks, Fixtures};

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    super::opencode::run_plugin(fx, out, "kilocode", aep_adapters::vendors::kilocode::adapter().as_ref());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore = "needs the spec checkout at /work/shared/aep-spec"]
    fn against_the_real_fixtures() {
        let mut out = Checks::default();
        run(&Fixtures::new("/work/shared/aep-spec"), &mut out);
        let checks = out.into_vec();
        for c in &checks {
            println!("{:?} {} {}", c.status, c.name, c.detail.clone().unwrap_or_default());
        }
        let failing: Vec<_> =
            checks.iter().filter(|c| c.status != crate::Status::Pass && !c.name.contains("sse_modes")).collect();
        assert!(failing.is_empty(), "{failing:?}");
    }
}
