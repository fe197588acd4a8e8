//! One module per vendor (in progress).

use crate::HookAdapter;

/// Every built-in hook adapter.
pub fn all() -> Vec<Box<dyn HookAdapter>> {
    Vec::new()
}

/// The built-in adapter for `vendor`, if any.
pub fn by_vendor(vendor: &str) -> Option<Box<dyn HookAdapter>> {
    all().into_iter().find(|a| a.vendor() == vendor)
}
