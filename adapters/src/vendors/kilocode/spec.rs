//! Kilo Code around its mapping: manifest, the held `permission.ask` (OpenCode's reply
//! shape), the plugin asset `aep-bridge install kilocode` writes.

use crate::spec::{AssetInstall, ControlSpec, InstallSpec, PluginDeps, VendorSpec};

/// The Kilo Code plugin shim.
pub const PLUGIN: &str = include_str!("plugin.js");

/// Kilo Code.
pub static SPEC: VendorSpec = VendorSpec {
    id: "kilocode",
    display_name: "Kilo Code",
    executables: &["kilo", "kilocode"],
    hook_channel: "plugin (Bun, fetch to /hooks/kilocode)",
    families: &["session", "run", "tool", "attention", "progress"],
    setup: "aep-bridge install kilocode [--project DIR]",
    control: ControlSpec {
        held: crate::vendors::opencode::spec::HELD,
        gate: None,
        reply: Some(crate::vendors::opencode::spec::reply),
    },
    install: Some(InstallSpec::Asset(AssetInstall {
        project_file: ".kilocode/plugins/aep-bridge.js",
        user_file: ".config/kilo/plugins/aep-bridge.js",
        content: PLUGIN,
        // Kilo loads every file of its `plugins/` folders by itself: nothing to register.
        note: None,
        project_note: None,
        deps: Some(PluginDeps { package: "@kilocode/plugin", user_dir_always: None }),
    })),
    otel: None,
    adapter: super::adapter,
};
