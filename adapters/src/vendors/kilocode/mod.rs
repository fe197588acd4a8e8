#![doc = include_str!("README.md")]

pub mod spec;
pub mod sse;

use crate::HookAdapter;
use crate::vendors::opencode::{PluginAdapter, Profile};

/// Kilo Code's profile: the OpenCode table on its own identity, plus the `>=7.4.6` bus
/// asks (`permission.asked`, `question.asked`/`question.replied`).
pub const KILOCODE: Profile = Profile { vendor: "kilocode", bus_asks: true };

/// The Kilo Code adapter (the OpenCode plugin adapter on the [`KILOCODE`] profile).
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(PluginAdapter::new(KILOCODE))
}

#[cfg(test)]
mod tests;
