//! Fixture class `mappings` (in progress: fails honestly until its implementation lands).

use crate::{Checks, Fixtures};

/// Appends this class's checks.
pub fn run(_fx: &Fixtures, out: &mut Checks) {
    out.fail("mappings: not implemented", "this class has no implementation yet");
}
