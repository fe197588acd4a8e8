#![doc = include_str!("README.md")]

use crate::HookAdapter;
use crate::generic::GenericAdapter;

/// The codex adapter (in progress: fallback mapping only).
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(GenericAdapter::new("codex"))
}
